// Drives moat's web console in headless Chromium (Debian's `chromium`, through
// playwright-core) for crates/moat-cli/tests/console.rs, which runs the gateway and the MCP
// client and talks with this script in lines: this script prints a step's name on stdout
// when it is done, and waits for a line on stdin where the test must act first.
//
// Usage: node console_test.mjs LOGIN_URL SCREENSHOT_DIR
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
  const places = [process.env.MOAT_INTEROP_DIR, here].filter(Boolean);
  for (const dir of places) {
    try {
      return createRequire(path.join(dir, "package.json"))("playwright-core");
    } catch {}
  }
  throw new Error("playwright-core is not installed (npm install in interop/, or `bash .ci/run --install-only`)");
}

const [login, shots] = process.argv.slice(2);
if (!login || !shots) {
  console.error("usage: node console_test.mjs LOGIN_URL SCREENSHOT_DIR");
  process.exit(2);
}
mkdirSync(shots, { recursive: true });
const origin = new URL(login).origin;

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
function step(name) {
  console.log(name);
}

const TIMEOUT = 60_000;
const { chromium } = loadPlaywright();
const profile = mkdtempSync(path.join(tmpdir(), "moat-console-chromium-"));
const context = await chromium.launchPersistentContext(profile, {
  executablePath: process.env.MOAT_CHROMIUM || "/usr/bin/chromium",
  headless: true,
  args: [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
  ],
  viewport: { width: 1200, height: 800 },
});
let failed = false;
try {
  const page = context.pages()[0] || (await context.newPage());
  page.setDefaultTimeout(TIMEOUT);

  // Logging in: the one-time link sets the cookie and leads to the page.
  await page.goto(login);
  await page.waitForURL(origin + "/");
  await page.getByRole("heading", { name: "Calls waiting for consent" }).waitFor();
  await page.getByText("Live.").waitFor();
  const cookies = await context.cookies(origin);
  const cookie = cookies.find((c) => c.name === "moat_console");
  if (!cookie || !cookie.httpOnly || cookie.sameSite !== "Strict") {
    throw new Error("the session cookie is not HttpOnly and SameSite=Strict: " + JSON.stringify(cookies));
  }
  const csrf = await page.locator('meta[name="csrf-token"]').getAttribute("content");
  step(`session ${cookie.value} ${csrf}`);
  step("logged-in");

  // A call waiting for consent appears; Approve once lets it through.
  const first = page.locator("article.pending").first();
  await first.waitFor();
  const firstId = await first.getAttribute("data-id");
  const firstText = await first.textContent();
  if (!firstText.includes("mutable__greet") || !firstText.includes("first")) {
    throw new Error("the pending call does not show its tool and arguments: " + firstText);
  }
  await page.screenshot({ path: path.join(shots, "console-pending.png"), fullPage: true });
  await first.getByRole("button", { name: "Approve once" }).click();
  await page.locator(`article.pending[data-id="${firstId}"]`).waitFor({ state: "detached" });
  step("approved");

  // The next one is denied.
  const second = page.locator(`article.pending:not([data-id="${firstId}"])`).first();
  await second.waitFor();
  await second.getByRole("button", { name: "Deny" }).click();
  await second.waitFor({ state: "detached" });
  step("denied");

  // A held pin, approved from the page.
  await nextLine("pin-held");
  await page.getByRole("tab", { name: "Pins" }).click();
  const pin = page.locator('article.pin[data-pin="mutable__note"]');
  for (let i = 0; i < 100 && !(await pin.count()); i++) {
    await page.locator("#pins button.refresh").click();
    await page.waitForTimeout(200);
  }
  await pin.waitFor();
  const diff = await pin.locator("pre").textContent();
  if (!diff.includes("changed")) throw new Error("the pin's diff does not show the change: " + diff);
  await page.screenshot({ path: path.join(shots, "console-pins.png"), fullPage: true });
  await pin.getByRole("button", { name: "Approve mutable__note" }).click();
  await pin.waitFor({ state: "detached" });
  step("pin-approved");

  // The audit trail finds the calls, filtered, and shows a record's detail.
  await nextLine("audit");
  await page.getByRole("tab", { name: "Audit trail" }).click();
  await page.getByLabel("Tool (glob)").fill("mutable__greet");
  const rows = page.locator("#audit-body tr.record");
  // The trail is written in the background: search until the three calls are there (one
  // refused before the browser came, one approved, one denied).
  for (let i = 0; i < 100; i++) {
    await page.getByRole("button", { name: "Search" }).click();
    await page.waitForTimeout(200);
    if ((await rows.count()) >= 3) break;
  }
  await rows.nth(2).waitFor();
  const outcomes = await rows.evaluateAll((rs) => rs.map((r) => r.dataset.outcome).sort());
  if (JSON.stringify(outcomes) !== JSON.stringify(["ok", "refused", "refused"])) {
    throw new Error("the audit search found " + JSON.stringify(outcomes));
  }
  await page.getByLabel("Outcome").selectOption("refused");
  await page.getByRole("button", { name: "Search" }).click();
  await page.getByText("2 records, newest first.").waitFor();
  await rows.first().getByRole("button").click();
  const record = await page.locator("#audit-detail-text").textContent();
  if (!record.includes("denied in the web console")) {
    throw new Error("the record's detail does not say how consent went: " + record);
  }
  await page.screenshot({ path: path.join(shots, "console-audit.png"), fullPage: true });
  step("audit-found");

  // The other views render.
  await page.getByRole("tab", { name: "Servers" }).click();
  await page.locator('#servers-body tr[data-server="mutable"] .state-up').waitFor();
  await page.screenshot({ path: path.join(shots, "console-servers.png"), fullPage: true });
  await page.getByRole("tab", { name: "Tools" }).click();
  await page.locator('#tools-body tr[data-tool="mutable__greet"]').getByText("ask").waitFor();
  await page.screenshot({ path: path.join(shots, "console-tools.png"), fullPage: true });
  step("done");
} catch (e) {
  failed = true;
  console.error("console test failed:", e);
  for (const page of context.pages()) {
    await page.screenshot({ path: path.join(shots, "console-failure.png"), fullPage: true }).catch(() => {});
  }
} finally {
  await context.close();
  rmSync(profile, { recursive: true, force: true });
  lines.close();
}
process.exit(failed ? 1 : 0);
