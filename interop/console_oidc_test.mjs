// Signs in to moat's web console through an OpenID Connect provider (oidc-provider, run by
// interop/oidc_issuer.mjs with MOAT_TEST_CONSOLE_CALLBACK) in headless Chromium, for
// crates/moat-cli/tests/console_oidc.rs. Talks with the test in lines: prints a step's
// name when done, waits for a line on stdin where the test must act first.
//
// Usage: node console_oidc_test.mjs CONSOLE_URL SCREENSHOT_DIR
// Env: MOAT_CHROMIUM (default /usr/bin/chromium), MOAT_INTEROP_DIR (where playwright-core
// is installed, default: this directory).

import { createRequire } from "node:module";
import { mkdtempSync, rmSync, mkdirSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import readline from "node:readline";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
function loadPlaywright() {
  for (const dir of [process.env.MOAT_INTEROP_DIR, here].filter(Boolean)) {
    try {
      return createRequire(path.join(dir, "package.json"))("playwright-core");
    } catch {}
  }
  throw new Error("playwright-core is not installed (npm install in interop/)");
}

const [consoleUrl, shots] = process.argv.slice(2);
if (!consoleUrl || !shots) {
  console.error("usage: node console_oidc_test.mjs CONSOLE_URL SCREENSHOT_DIR");
  process.exit(2);
}
mkdirSync(shots, { recursive: true });
const origin = new URL(consoleUrl).origin;

const lines = readline.createInterface({ input: process.stdin });
const waiting = [];
const queued = [];
lines.on("line", (line) => {
  const next = waiting.shift();
  if (next) next(line.trim());
  else queued.push(line.trim());
});
function nextLine(expected) {
  return new Promise((resolve, reject) => {
    const check = (line) => (line === expected ? resolve() : reject(new Error(`expected ${expected}, got ${line}`)));
    if (queued.length) check(queued.shift());
    else waiting.push(check);
  });
}
const step = (name) => console.log(name);
const fail = (why) => {
  throw new Error(why);
};

const { chromium } = loadPlaywright();
const profile = mkdtempSync(path.join(tmpdir(), "moat-console-oidc-chromium-"));
const context = await chromium.launchPersistentContext(profile, {
  executablePath: process.env.MOAT_CHROMIUM || "/usr/bin/chromium",
  headless: true,
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  viewport: { width: 1200, height: 800 },
});
async function sessionCookie() {
  return (await context.cookies(origin)).find((c) => c.name === "moat_console");
}
let failed = false;
try {
  const page = context.pages()[0] || (await context.newPage());
  page.setDefaultTimeout(60_000);

  // From the console's door to the provider's login (a test route that signs in `?user=`).
  async function toProvider() {
    const door = await page.goto(consoleUrl);
    if (door.status() !== 401) fail(`the console let a stranger in: ${door.status()}`);
    await page.getByRole("link", { name: /^Sign in with / }).click();
    await page.waitForURL(/\/_test\/interaction\//);
    return page.url();
  }

  // A callback whose state this browser was not given: refused, nobody logged in.
  await toProvider();
  const forged = await page.goto(`${origin}/oidc/callback?state=forged&code=whatever`);
  const forgedText = await page.locator("#login-error").textContent();
  if (forged.status() !== 403 || !forgedText.includes("state mismatch")) {
    fail(`a forged state: ${forged.status()} ${forgedText}`);
  }
  if (await sessionCookie()) fail("a forged state left a session cookie");
  step("forged-state-refused");

  // bob signs in at the provider, but is not on the console's allow-list.
  let interaction = await toProvider();
  await page.goto(`${interaction}?user=bob`);
  await page.locator("#login-error").waitFor();
  const bobText = await page.locator("#login-error").textContent();
  if (!bobText.includes('"bob"') || !bobText.includes("not allowed")) fail(`bob: ${bobText}`);
  await page.screenshot({ path: path.join(shots, "console-oidc-refused.png"), fullPage: true });
  if (await sessionCookie()) fail("bob got a session cookie");
  step("not-allowed-refused");

  // alice (group ops) signs in; the callback URL is kept to replay later. The provider
  // would remember bob's sign-in: its cookies go (the console has none yet).
  await context.clearCookies();
  let callback;
  page.on("request", (r) => {
    if (r.url().startsWith(`${origin}/oidc/callback?`)) callback = r.url();
  });
  interaction = await toProvider();
  await page.goto(`${interaction}?user=alice`);
  await page.waitForURL(`${origin}/`);
  await page.getByText("Signed in as alice.").waitFor();
  await page.getByText("Live.").waitFor();
  const cookie = await sessionCookie();
  if (!cookie || !cookie.httpOnly || cookie.sameSite !== "Strict") {
    fail("the session cookie is not HttpOnly and SameSite=Strict: " + JSON.stringify(cookie));
  }
  if (!callback) fail("no callback seen");
  step("logged-in");

  // A call waiting for consent, approved by alice.
  const pending = page.locator("article.pending").first();
  await pending.waitFor();
  await page.screenshot({ path: path.join(shots, "console-oidc-pending.png"), fullPage: true });
  await pending.getByRole("button", { name: "Approve once" }).click();
  await pending.waitFor({ state: "detached" });
  step("approved");

  // The same callback again (a replayed code): refused, no new session.
  const replay = await page.goto(callback);
  const replayText = await page.locator("#login-error").textContent();
  if (replay.status() !== 403 || (replay.headers()["set-cookie"] || "").includes("moat_console=")) {
    fail(`a replayed callback: ${replay.status()} ${replayText}`);
  }
  step("replay-refused");

  // A configuration reload whose allow-list no longer has alice (group ops) closes her
  // session: her next request is not let in. The reload applies within moments; polled.
  const api = async () => (await page.request.get(`${origin}/api/pending`)).status();
  if ((await api()) !== 200) fail("alice's session did not let her read /api/pending");
  step("session-live");
  await nextLine("reloaded");
  let after = 200;
  for (let i = 0; i < 150 && after === 200; i++) {
    await new Promise((r) => setTimeout(r, 200));
    after = await api();
  }
  if (after !== 401) fail(`alice's session after the reload that dropped her group: ${after}`);
  const door = await page.goto(consoleUrl);
  if (door.status() !== 401) fail(`the page after the reload: ${door.status()}`);
  step("session-closed");

  // The provider goes down between its answer and the token request: a clear page, and
  // no session. The provider's redirect to the console is held until the test says so.
  // A new browser session (the provider would remember alice, and skip its login).
  await context.clearCookies();
  interaction = await toProvider();
  // The provider's redirects are followed by hand (with the browser's cookies) up to the
  // console's callback, which is kept rather than opened.
  let held;
  let url = `${interaction}?user=alice`;
  for (let i = 0; i < 10 && !held; i++) {
    const hop = await page.request.get(url, { maxRedirects: 0 });
    const location = hop.headers()["location"];
    if (!location) fail(`the provider stopped at ${url}: ${hop.status()}`);
    url = new URL(location, url).href;
    if (url.startsWith(`${origin}/oidc/callback?`)) held = url;
  }
  if (!held) fail("the provider did not send the browser back");
  step("provider-answered");
  await nextLine("provider-down");
  const down = await page.goto(held);
  const downText = await page.locator("#login-error").textContent();
  if (down.status() !== 502 || !downText.includes("could not be used")
    || (down.headers()["set-cookie"] || "").includes("moat_console=")) {
    fail(`the provider down: ${down.status()} ${downText}`);
  }
  await page.screenshot({ path: path.join(shots, "console-oidc-provider-down.png"), fullPage: true });
  if (await sessionCookie()) fail("a sign-in with the provider down left a session cookie");
  step("provider-down-refused");
} catch (e) {
  failed = true;
  console.error("console OIDC test failed:", e);
  for (const page of context.pages()) {
    await page.screenshot({ path: path.join(shots, "console-oidc-failure.png"), fullPage: true }).catch(() => {});
  }
} finally {
  await context.close();
  rmSync(profile, { recursive: true, force: true });
  lines.close();
}
process.exit(failed ? 1 : 0);
