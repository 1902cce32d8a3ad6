//! Adding `allow` rules to a config file a person owns (`allow always`).
//!
//! The file stays what it was apart from the added rules: its keys keep
//! their order and its indentation is kept. A file with comments is left
//! alone (a JSON writer would drop them) and the person is told the exact
//! lines to add by hand. The result is checked as a config before it may
//! replace the file, so an edit can never install something invalid.

use serde_json::{Map, Value};

/// `text` with `allow` rules for each `(surface, pattern)`, and the lines
/// added, as `permission.<surface>: "<pattern>": "allow"`. A pattern that
/// already has a state is moved to the end of its surface (so it is the
/// last match there, as rule order decides) with `allow`.
pub fn add_allow_rules(
    text: &str,
    rules: &[(String, String)],
) -> Result<(String, Vec<String>), String> {
    let added: Vec<String> = rules
        .iter()
        .map(|(surface, pattern)| {
            format!(
                "permission.{surface}: {}: \"allow\"",
                Value::String(pattern.clone())
            )
        })
        .collect();
    let mut stripped = String::new();
    std::io::Read::read_to_string(
        &mut json_comments::StripComments::new(text.as_bytes()),
        &mut stripped,
    )
    .map_err(|e| format!("the file cannot be read as JSON: {e}"))?;
    if stripped != text {
        return Err(format!(
            "the file has comments, which permfs would lose by rewriting it; add by hand: {}",
            added.join("; ")
        ));
    }
    let mut value: Value = if text.trim().is_empty() {
        Value::Object(Map::new())
    } else {
        serde_json::from_str(text).map_err(|e| format!("the file is not valid JSON: {e}"))?
    };
    let object = value
        .as_object_mut()
        .ok_or("the file is not a JSON object")?;
    let permission = object
        .entry("permission")
        .or_insert_with(|| Value::Object(Map::new()));
    let permission = permission
        .as_object_mut()
        .ok_or("\"permission\" is not an object")?;
    for (surface, pattern) in rules {
        let entry = permission
            .entry(surface.clone())
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::String(state) = entry {
            let mut map = Map::new();
            map.insert("*".into(), Value::String(state.clone()));
            *entry = Value::Object(map);
        }
        let map = entry
            .as_object_mut()
            .ok_or_else(|| format!("permission.{surface} is neither a state nor a map"))?;
        map.shift_remove(pattern);
        map.insert(pattern.clone(), Value::String("allow".into()));
    }
    let indent = text
        .lines()
        .find_map(|line| {
            let trimmed = line.trim_start();
            let width = line.len() - trimmed.len();
            (width > 0 && !trimmed.is_empty()).then(|| line[..width].to_string())
        })
        .unwrap_or_else(|| "  ".into());
    let mut out = Vec::new();
    let formatter = serde_json::ser::PrettyFormatter::with_indent(indent.as_bytes());
    let mut serializer = serde_json::Serializer::with_formatter(&mut out, formatter);
    serde::Serialize::serialize(&value, &mut serializer)
        .map_err(|e| format!("the config cannot be written: {e}"))?;
    out.push(b'\n');
    let new_text = String::from_utf8(out).map_err(|e| e.to_string())?;
    super::config::ConfigFile::parse(new_text.as_bytes())
        .map_err(|e| format!("the edited config would not be valid: {e}"))?;
    Ok((new_text, added))
}

/// Replaces `path` with `text` in one rename, keeping the file's owner and
/// mode: a reader sees the old file or the new one, never half of it.
pub fn replace_file(path: &std::path::Path, text: &str) -> Result<(), String> {
    use std::io::Write;
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::symlink_metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
    if !meta.file_type().is_file() {
        return Err(format!("{} is not a regular file", path.display()));
    }
    let dir = path.parent().ok_or("the config file has no directory")?;
    let name = path
        .file_name()
        .ok_or("the config file has no name")?
        .to_string_lossy();
    let temp = dir.join(format!(".{name}.permfs-{}", std::process::id()));
    let written = (|| -> std::io::Result<()> {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temp)?;
        file.set_permissions(meta.permissions())?;
        std::os::unix::fs::fchown(&file, Some(meta.uid()), Some(meta.gid()))?;
        file.write_all(text.as_bytes())?;
        file.sync_all()?;
        std::fs::rename(&temp, path)
    })();
    written.map_err(|e| {
        let _ = std::fs::remove_file(&temp);
        format!("{} cannot be replaced: {e}", path.display())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_are_added_keeping_order_and_indentation() {
        let text = "{\n    \"permission\": {\n        \"*\": \"ask\",\n        \"bash\": \"ask\"\n    },\n    \"forwardingTimeoutMs\": 1000\n}\n";
        let (edited, added) = add_allow_rules(
            text,
            &[
                ("bash".into(), "git push *".into()),
                ("read".into(), "/w/*".into()),
            ],
        )
        .expect("edited");
        assert_eq!(
            edited,
            "{\n    \"permission\": {\n        \"*\": \"ask\",\n        \"bash\": {\n            \"*\": \"ask\",\n            \"git push *\": \"allow\"\n        },\n        \"read\": {\n            \"/w/*\": \"allow\"\n        }\n    },\n    \"forwardingTimeoutMs\": 1000\n}\n"
        );
        assert_eq!(added[0], "permission.bash: \"git push *\": \"allow\"");
        let commented = "{\n  // mine\n  \"permission\": {}\n}\n";
        let refused =
            add_allow_rules(commented, &[("bash".into(), "ls".into())]).expect_err("comments");
        assert!(
            refused.contains("add by hand: permission.bash: \"ls\": \"allow\""),
            "{refused}"
        );
    }
}
