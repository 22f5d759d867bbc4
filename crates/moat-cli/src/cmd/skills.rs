//! `moat skills` and `moat skill NAME`: the skills a server offers (the Skills extension),
//! and one skill's instructions and files.

use anyhow::anyhow;
use moat::types::{ResourceContents, Skill, SkillResources};
use serde_json::{Value, json};

use crate::Failure;
use crate::cli::{ListArgs, SkillArgs};
use crate::cmd::client::{connect, header, settle};
use crate::output::{self, bold, dim};

pub async fn skills(args: ListArgs) -> Result<(), Failure> {
    let client = connect(args.url.as_deref(), &args.target).await?;
    let child = client.child().cloned();
    let listed = if client.offers_skills() {
        client.list_all_skills().await
    } else {
        Ok(Vec::new())
    };
    let meta = header(&client);
    client.close().await;
    let skills = settle(listed, child).await?;
    output::to_stdout(|out| {
        if args.json {
            let mut all = meta;
            all.insert("skills".into(), json!(skills));
            return output::write_json(out, &Value::Object(all));
        }
        if skills.is_empty() {
            return writeln!(out, "{}", dim("(no skills)"));
        }
        for skill in &skills {
            writeln!(out, "{}  {}", bold(skill.name()), dim(&files(skill)))?;
            let description = skill.description();
            if !description.is_empty() {
                writeln!(out, "    {description}")?;
            }
        }
        Ok(())
    })
}

pub async fn skill(args: SkillArgs) -> Result<(), Failure> {
    let client = connect(args.url.as_deref(), &args.target).await?;
    let child = client.child().cloned();
    if !client.offers_skills() {
        client.close().await;
        return Err(Failure::Connection(anyhow!(
            "the server offers no skills (it does not declare the Skills extension)"
        )));
    }
    let found = find(&client, &args.name).await;
    let found = match found {
        Ok(Some(skill)) => {
            let text = client.read_resource(&skill.uri).await;
            text.map(|read| Some((skill, read)))
        }
        Ok(None) => Ok(None),
        Err(e) => Err(e),
    };
    client.close().await;
    let Some((skill, read)) = settle(found, child).await? else {
        return Err(Failure::Usage(anyhow!(
            "no skill is called {:?}: `moat skills` lists them",
            args.name
        )));
    };
    let text: String = read
        .contents
        .iter()
        .filter_map(|c| match c {
            ResourceContents::Text(t) => Some(t.text.as_str()),
            _ => None,
        })
        .collect();
    output::to_stdout(|out| {
        if args.json {
            return output::write_json(out, &json!({ "skill": skill, "text": text }));
        }
        write!(out, "{text}")?;
        if !text.ends_with('\n') {
            writeln!(out)?;
        }
        if let SkillResources::Files(list) = &skill.resources {
            writeln!(
                out,
                "{}",
                dim(&format!("--- {} ({})", skill.uri, files(&skill)))
            )?;
            for file in list {
                writeln!(
                    out,
                    "{}",
                    dim(&format!("    {} ({} bytes)", file.uri, file.size))
                )?;
            }
        }
        Ok(())
    })
}

/// The skill called `name` (its frontmatter name, or the URI of its SKILL.md).
async fn find(client: &moat::Client, name: &str) -> moat::Result<Option<Skill>> {
    if name.contains("://") {
        return client.get_skill(name).await.map(Some);
    }
    let skills = client.list_all_skills().await?;
    Ok(skills.into_iter().find(|s| s.name() == name))
}

fn files(skill: &Skill) -> String {
    match &skill.resources {
        SkillResources::Files(list) if list.len() == 1 => "1 file".to_owned(),
        SkillResources::Files(list) => format!("{} files", list.len()),
        _ => "files listed as read".to_owned(),
    }
}
