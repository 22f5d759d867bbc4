//! A server's elicitation form (other than the gateway's consent question) filled in field by
//! field: each property of the requested schema is asked for, its answer checked against its
//! type; an empty answer takes the default, or leaves an optional field out.

use std::collections::BTreeMap;

use moat::types::ElicitValue;
use serde_json::Value;

/// One field as it is asked.
fn label(name: &str, field: &Value, required: bool) -> String {
    let title = field["title"].as_str().unwrap_or(name);
    let mut text = format!("  {title}");
    if let Some(d) = field["description"].as_str() {
        text.push_str(&format!(" — {d}"));
    }
    let kind = field["type"].as_str().unwrap_or("string");
    let choices: Vec<&str> = field["enum"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    if !choices.is_empty() {
        text.push_str(&format!(" ({})", choices.join(" | ")));
    } else if kind != "string" {
        text.push_str(&format!(" ({kind})"));
    }
    if let Some(d) = field.get("default") {
        text.push_str(&format!(" [{d}]"));
    } else if !required {
        text.push_str(" [optional]");
    }
    text.push_str(": ");
    text
}

/// Parses `answer` for `field`; `Err` says what is wrong.
fn parse(field: &Value, answer: &str) -> Result<ElicitValue, String> {
    match field["type"].as_str().unwrap_or("string") {
        "boolean" => match answer.to_ascii_lowercase().as_str() {
            "y" | "yes" | "true" => Ok(ElicitValue::Boolean(true)),
            "n" | "no" | "false" => Ok(ElicitValue::Boolean(false)),
            _ => Err("answer yes or no".into()),
        },
        "integer" => answer
            .parse()
            .map(ElicitValue::Integer)
            .map_err(|_| "a whole number".into()),
        "number" => answer
            .parse()
            .map(ElicitValue::Number)
            .map_err(|_| "a number".into()),
        _ => {
            let choices: Vec<&str> = field["enum"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            if !choices.is_empty() && !choices.contains(&answer) {
                return Err(format!("one of {}", choices.join(", ")));
            }
            Ok(ElicitValue::String(answer.to_owned()))
        }
    }
}

fn from_default(value: &Value) -> Option<ElicitValue> {
    match value {
        Value::Bool(b) => Some(ElicitValue::Boolean(*b)),
        Value::Number(n) => n
            .as_i64()
            .map(ElicitValue::Integer)
            .or(n.as_f64().map(ElicitValue::Number)),
        Value::String(s) => Some(ElicitValue::String(s.clone())),
        _ => None,
    }
}

/// Fills `schema` by asking `ask` (which shows a label and returns the line typed, `None` at
/// the end of input). `None`: the person gave up (the form is declined).
pub fn fill(
    message: &str,
    schema: &Value,
    ask: &mut dyn FnMut(&str) -> Option<String>,
) -> Option<BTreeMap<String, ElicitValue>> {
    let required: Vec<&str> = schema["required"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let mut content = BTreeMap::new();
    let mut intro =
        format!("\n{message}\n(an empty answer to a required field declines the form)\n");
    for (name, field) in schema["properties"].as_object().into_iter().flatten() {
        let is_required = required.contains(&name.as_str());
        let mut prompt = format!("{intro}{}", label(name, field, is_required));
        intro.clear();
        loop {
            // Every word of the prompt but moat's own is the server's.
            let answer = ask(&crate::sanitize::sanitize(&prompt, true))?;
            let answer = answer.trim();
            if answer.is_empty() {
                if let Some(d) = field.get("default").and_then(from_default) {
                    content.insert(name.clone(), d);
                } else if is_required {
                    return None;
                }
                break;
            }
            match parse(field, answer) {
                Ok(v) => {
                    content.insert(name.clone(), v);
                    break;
                }
                Err(want) => prompt = format!("  ({want}) {}", label(name, field, is_required)),
            }
        }
    }
    Some(content)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A server writes the whole form: its message, field names, titles, descriptions,
    /// choices and defaults are all shown without what a terminal would act on.
    #[test]
    fn a_servers_form_is_shown_without_escapes() {
        let schema = json!({"type": "object", "properties": {
            "k\x1b[2J": {"type": "string", "title": "T\x1b]52;c;eA==\x07", "description": "d\u{202E}",
                "enum": ["a\u{9b}1m"], "default": "a\u{9b}1m"},
        }});
        let mut asked = String::new();
        fill("M\x1b[1A\r", &schema, &mut |p| {
            asked.push_str(p);
            Some(String::new())
        });
        assert!(!asked.chars().any(crate::sanitize::is_hidden), "{asked:?}");
        assert!(asked.contains("M[1A\n"), "{asked:?}");
    }

    #[test]
    fn a_form_is_filled_field_by_field_and_retyped_when_wrong() {
        let schema = json!({"type": "object", "properties": {
            "age": {"type": "integer"}, "color": {"type": "string", "enum": ["red", "blue"]},
            "name": {"type": "string"}, "subscribe": {"type": "boolean", "default": false},
        }, "required": ["name", "age"]});
        let mut answers = vec!["forty", "40", "green", "blue", "Ada", ""].into_iter();
        let mut asked = Vec::new();
        let filled = fill("Tell me", &schema, &mut |p| {
            asked.push(p.to_owned());
            answers.next().map(str::to_owned)
        })
        .expect("filled");
        assert_eq!(filled["age"], ElicitValue::Integer(40));
        assert_eq!(filled["color"], ElicitValue::String("blue".into()));
        assert_eq!(filled["name"], ElicitValue::String("Ada".into()));
        assert_eq!(filled["subscribe"], ElicitValue::Boolean(false));
        assert!(asked[1].contains("whole number"), "{asked:?}");
        let mut none = std::iter::empty::<String>();
        assert!(fill("Tell me", &schema, &mut |_| none.next()).is_none());
    }
}
