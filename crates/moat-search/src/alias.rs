//! Query expansion from a curated table of general vocabulary: shell verbs, chat and
//! code-hosting shorthand, cloud jargon, and everyday phrasings of common operations,
//! mapped to the words tool descriptions tend to use instead.
//!
//! The table is written from general knowledge of how people talk to tools, never from
//! particular tasks of an evaluation set: what it knows must hold for catalogs and requests
//! nobody has seen. Each entry maps a word or phrase (lower case, matched on whole words)
//! to extra words; the index weighs those below the user's own words.

/// (trigger, expansion). Multi-word triggers match consecutive words.
const ALIASES: &[(&str, &str)] = &[
    // Shell verbs and tools.
    ("executable", "permissions mode chmod"),
    ("permission", "permissions chmod mode"),
    ("checksum", "hash digest"),
    ("hash", "checksum digest"),
    ("sha256", "checksum hash digest"),
    ("sha1", "checksum hash digest"),
    ("md5", "checksum hash digest"),
    ("untar", "extract archive"),
    ("unpack", "extract archive"),
    ("decompress", "extract archive"),
    ("compress", "archive"),
    ("duplicate", "copy"),
    ("save", "write file"),
    ("overwrite", "write replace"),
    ("biggest", "size largest sort"),
    ("largest", "size sort"),
    ("space", "disk size usage"),
    ("tree", "directory structure recursive"),
    ("ls", "list files directory"),
    ("ll", "list files directory"),
    ("dir", "directory list files"),
    ("cd", "directory"),
    ("pwd", "current directory"),
    ("rm", "delete remove file"),
    ("rmdir", "delete remove directory"),
    ("mv", "move rename file"),
    ("cp", "copy file"),
    ("cat", "read file contents show"),
    ("less", "read file"),
    ("head", "read file first lines"),
    ("tail", "read file last lines"),
    ("grep", "search find text pattern"),
    ("rg", "search find text pattern"),
    ("find", "search"),
    ("mkdir", "create directory folder"),
    ("touch", "create file"),
    ("chmod", "permissions file"),
    ("chown", "owner permissions file"),
    ("stat", "file info metadata"),
    ("du", "disk usage size"),
    ("df", "disk space usage"),
    ("wc", "count lines words"),
    ("diff", "compare differences"),
    ("sed", "replace edit text"),
    ("awk", "text process"),
    ("curl", "http request fetch url"),
    ("wget", "download fetch url"),
    ("ps", "list processes"),
    ("kill", "stop terminate process"),
    ("tar", "archive compress"),
    ("zip", "archive compress"),
    ("unzip", "extract archive"),
    ("ssh", "remote shell connect"),
    ("sudo", "run command"),
    ("exec", "run execute command"),
    ("cron", "schedule job recurring"),
    ("folder", "directory"),
    ("fs", "file system files"),
    ("kubectl", "kubernetes"),
    ("psql", "postgres database sql"),
    ("mysql", "database sql"),
    ("sqlite", "database sql"),
    ("aws", "amazon cloud"),
    ("gcloud", "google cloud"),
    ("gcp", "google cloud"),
    ("azure", "cloud"),
    // Chat, mail, meetings.
    ("announce", "post message channel"),
    ("broadcast", "post message channel"),
    ("notify", "message send"),
    ("react", "reaction emoji"),
    ("emoji", "reaction"),
    ("room", "channel"),
    ("rooms", "channels"),
    ("members", "users"),
    ("member", "user"),
    ("teammates", "users"),
    ("away", "status"),
    ("vacation", "out of office status"),
    ("holiday", "out of office"),
    ("pto", "out of office"),
    ("agenda", "events calendar list"),
    ("meetings", "events calendar"),
    ("postpone", "reschedule move event"),
    ("push back", "reschedule move"),
    ("rsvp", "respond accept decline"),
    ("accept", "respond"),
    ("decline", "respond"),
    ("unread", "mark read"),
    ("write to", "send message"),
    ("dm", "direct message send user"),
    ("pm", "private message send"),
    ("msg", "message"),
    ("ping", "message send notify"),
    ("tell", "message send"),
    ("mail", "email message"),
    ("inbox", "email messages"),
    ("cc", "email copy recipient"),
    ("reply", "respond message thread"),
    ("thread", "replies conversation"),
    ("channel", "conversation"),
    ("standup", "meeting event"),
    ("sync", "meeting synchronize"),
    ("sync up", "meeting schedule"),
    ("catch up", "meeting"),
    ("one on one", "meeting"),
    ("meeting", "event calendar"),
    ("appointment", "event calendar"),
    ("appt", "appointment event calendar"),
    ("cal", "calendar"),
    ("schedule", "calendar event"),
    ("book", "schedule create event"),
    ("reschedule", "update move event"),
    ("free", "availability busy"),
    ("available", "availability free busy"),
    ("availability", "free busy"),
    ("busy", "availability free"),
    ("ooo", "out of office"),
    ("tz", "timezone time zone"),
    ("remind", "reminder notify"),
    // Code hosting and issue tracking.
    ("close", "update state closed"),
    ("reopen", "update state open"),
    ("assign", "assignee update"),
    ("approve", "review approve"),
    ("lgtm", "approve review"),
    ("feature request", "issue"),
    ("bug report", "issue"),
    ("patch", "diff changes"),
    ("rerun", "run again workflow"),
    ("retry", "rerun"),
    ("switch", "checkout"),
    ("stage", "add index"),
    ("unstage", "reset index"),
    ("undo", "revert reset"),
    ("throw away", "discard"),
    ("history", "log commits"),
    ("who changed", "blame"),
    ("upstream", "remote"),
    ("origin", "remote"),
    ("shelve", "stash"),
    ("pr", "pull request"),
    ("prs", "pull requests"),
    ("mr", "merge request pull request"),
    ("repo", "repository"),
    ("repos", "repositories"),
    ("ticket", "issue"),
    ("tickets", "issues"),
    ("bug", "issue"),
    ("todo", "task"),
    ("ci", "pipeline build workflow"),
    ("build", "pipeline workflow"),
    ("merge", "pull request"),
    ("review", "pull request comment"),
    ("checkout", "branch"),
    ("commit", "commits change"),
    ("blame", "commit history"),
    ("fork", "repository copy"),
    ("clone", "repository copy"),
    ("star", "repository"),
    ("release", "tag version"),
    ("gh", "github"),
    // Data and databases.
    ("vacuum", "table statistics maintenance"),
    ("analyze", "statistics"),
    ("migration", "schema alter statement"),
    ("alter", "statement schema"),
    ("insert", "statement execute"),
    ("dump", "backup export"),
    ("restore", "backup"),
    ("slow", "performance explain"),
    ("db", "database"),
    ("sql", "query database"),
    ("table", "database"),
    ("tables", "database schema"),
    ("schema", "table columns structure"),
    ("column", "table"),
    ("row", "record table"),
    ("rows", "records table"),
    ("how many", "count query sql"),
    ("what's in", "read contents list"),
    ("average", "query sql statistics"),
    ("avg", "average query sql"),
    ("total", "sum count query"),
    ("per month", "query group"),
    ("per day", "query group"),
    ("count", "query"),
    ("stats", "statistics metrics"),
    ("csv", "data spreadsheet"),
    ("spreadsheet", "sheet"),
    // Cloud and operations.
    ("vault", "secret"),
    ("password", "secret credential"),
    ("api key", "secret credential"),
    ("token", "secret credential"),
    ("mx", "dns record mail"),
    ("cname", "dns record"),
    ("bill", "cost billing"),
    ("billing", "cost"),
    ("spend", "cost"),
    ("invoke", "run call function"),
    ("trigger", "run invoke"),
    ("scale", "replicas"),
    ("replicas", "scale"),
    ("restart", "reboot rollout"),
    ("k8s", "kubernetes cluster"),
    ("kube", "kubernetes"),
    ("pod", "kubernetes container"),
    ("pods", "kubernetes containers"),
    ("s3", "bucket object storage"),
    ("gcs", "bucket object storage"),
    ("blob", "object storage"),
    ("bucket", "storage objects"),
    ("vm", "virtual machine instance"),
    ("vms", "virtual machines instances"),
    ("ec2", "instance virtual machine"),
    ("lambda", "function serverless"),
    ("container", "docker"),
    ("docker", "container"),
    ("deploy", "deployment release"),
    ("rollback", "revert deployment"),
    ("env", "environment"),
    ("env var", "environment variable"),
    ("dns", "domain record"),
    ("ip", "address network"),
    ("cpu", "usage metrics"),
    ("ram", "memory usage"),
    ("logs", "log entries"),
    ("alert", "monitor alarm incident"),
    ("outage", "incident"),
    ("on call", "oncall schedule incident"),
    ("secret", "credential"),
    ("creds", "credentials secret"),
    ("cfg", "configuration"),
    ("config", "configuration settings"),
    ("settings", "configuration"),
    // Documents, notes, web.
    ("visit", "navigate open page"),
    ("go to", "navigate"),
    ("devtools", "console browser"),
    ("console", "messages log"),
    ("js", "javascript"),
    ("popup", "dialog"),
    ("keyboard", "key press"),
    ("shortcut", "key press"),
    ("hotkey", "key press"),
    ("ctrl", "key press"),
    ("doc", "document"),
    ("docs", "documents documentation"),
    ("note", "page document"),
    ("notes", "pages documents"),
    ("wiki", "page document"),
    ("pdf", "document file"),
    ("img", "image"),
    ("pic", "image photo"),
    ("photo", "image"),
    ("screenshot", "image capture"),
    ("link", "url"),
    ("url", "link web page"),
    ("site", "website web"),
    ("website", "web page url"),
    ("google", "search web"),
    ("look up", "search find"),
    ("lookup", "search find"),
    ("browse", "web page"),
    ("scrape", "fetch web page"),
    ("download", "fetch get"),
    ("upload", "put write"),
    // Everyday verbs.
    ("add", "create"),
    ("make", "create"),
    ("new", "create"),
    ("change", "update edit modify"),
    ("edit", "update modify"),
    ("modify", "update edit"),
    ("rename", "move"),
    ("tweak", "update edit"),
    ("fix", "update edit"),
    ("erase", "delete remove"),
    ("wipe", "delete remove"),
    ("drop", "delete remove"),
    ("trash", "delete"),
    ("nuke", "delete"),
    ("get rid of", "delete remove"),
    ("locate", "find search"),
    ("run", "execute"),
    ("execute", "run"),
    ("launch", "start run"),
];

/// Words the table adds for a query's words (lower case), without the query's own words,
/// deduplicated, in order.
pub fn expand(words: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for (trigger, expansion) in ALIASES {
        let t: Vec<&str> = trigger.split(' ').collect();
        let hit = words
            .windows(t.len())
            .any(|w| w.iter().zip(&t).all(|(a, b)| a == b));
        if !hit {
            continue;
        }
        for e in expansion.split(' ') {
            if !words.iter().any(|w| w == e) && !out.iter().any(|o| o == e) {
                out.push(e.to_owned());
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn x(q: &str) -> Vec<String> {
        expand(&crate::text::words(q))
    }

    #[test]
    fn shell_verbs_and_jargon() {
        assert_eq!(x("rm"), ["delete", "remove", "file"]);
        assert_eq!(x("ls the folder"), ["list", "files", "directory"]);
        assert!(x("DM bob").contains(&"message".to_owned()));
        assert!(x("open a PR").contains(&"pull".to_owned()));
        assert!(x("list k8s pods").contains(&"kubernetes".to_owned()));
    }

    #[test]
    fn phrases_match_whole_words_in_order() {
        assert!(x("can we sync up tomorrow").contains(&"meeting".to_owned()));
        assert!(x("how many rows").contains(&"count".to_owned()));
        assert!(!x("many how").contains(&"count".to_owned()));
        // "rm" inside another word does not trigger.
        assert!(x("confirm").is_empty());
    }

    #[test]
    fn no_duplicates_and_not_the_query_words() {
        let e = x("delete rm erase");
        assert!(!e.contains(&"delete".to_owned()));
        assert_eq!(e.iter().filter(|w| *w == "remove").count(), 1);
    }

    #[test]
    fn table_is_well_formed() {
        for (t, e) in ALIASES {
            assert_eq!(*t, t.to_lowercase(), "triggers are lower case");
            assert!(!t.is_empty() && !e.is_empty());
            assert!(!t.starts_with(' ') && !t.ends_with(' ') && !e.contains("  "));
            // A trigger the word splitter would break apart could never match.
            assert_eq!(crate::text::words(t).join(" "), *t, "trigger {t:?}");
        }
    }
}
