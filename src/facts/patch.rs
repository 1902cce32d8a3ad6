//! Codex's `apply_patch` envelope, read for the files it touches.
//!
//! A patch is a tool call that writes files, but as a surface alone it
//! names none: `*.env: deny` never met a patch that edits `.env`, and the
//! person saw no file name. The envelope is line-oriented:
//!
//! ```text
//! *** Begin Patch
//! *** Add File: path
//! *** Update File: path
//! *** Move to: path
//! *** Delete File: path
//! *** End Patch
//! ```
//!
//! Each header names a file the patch writes (a move writes both names).
//! A patch that does not have this shape, or names no file, is not
//! understood: the caller floors it to `ask`.

/// The files `patch` writes, in order and without repeats, or why the
/// patch is not understood.
pub fn written_files(patch: &str) -> Result<Vec<String>, String> {
    let mut lines = patch.lines().map(|l| l.trim_end_matches('\r'));
    let first = lines.by_ref().find(|l| !l.trim().is_empty());
    if first.map(str::trim) != Some("*** Begin Patch") {
        return Err("the patch does not start with *** Begin Patch".into());
    }
    let mut files: Vec<String> = Vec::new();
    let mut ended = false;
    for line in lines {
        if ended {
            if !line.trim().is_empty() {
                return Err("text after *** End Patch".into());
            }
            continue;
        }
        if line.trim() == "*** End Patch" {
            ended = true;
            continue;
        }
        let Some(header) = line.strip_prefix("*** ") else {
            continue;
        };
        let path = ["Add File: ", "Update File: ", "Delete File: ", "Move to: "]
            .iter()
            .find_map(|p| header.strip_prefix(p));
        match path {
            Some(path) if !path.trim().is_empty() => {
                let path = path.trim().to_string();
                if path.contains('\0') {
                    return Err("a file name holds a NUL".into());
                }
                if !files.contains(&path) {
                    files.push(path);
                }
            }
            Some(_) => return Err(format!("a header names no file: {line:?}")),
            None if header.starts_with("End of File") => {}
            None => return Err(format!("an unknown header: {line:?}")),
        }
    }
    if !ended {
        return Err("the patch does not end with *** End Patch".into());
    }
    if files.is_empty() {
        return Err("the patch names no file".into());
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_header_names_a_written_file() {
        let patch = "*** Begin Patch\n*** Add File: a/new.rs\n+fn x() {}\n*** Update File: .env\n@@\n-A=1\n+A=2\n*** Move to: b/.env\n*** Delete File: old.txt\n*** End Patch\n";
        assert_eq!(
            written_files(patch).expect("parses"),
            ["a/new.rs", ".env", "b/.env", "old.txt"]
        );
    }

    #[test]
    fn what_is_not_a_patch_is_not_understood() {
        for bad in [
            "",
            "*** Add File: x\n",
            "*** Begin Patch\n*** Add File: x\n",
            "*** Begin Patch\n*** End Patch\n",
            "*** Begin Patch\n*** Frobnicate File: x\n*** End Patch\n",
            "*** Begin Patch\n*** Add File: \n*** End Patch\n",
            "*** Begin Patch\n*** Add File: x\n*** End Patch\nrm -rf /\n",
        ] {
            assert!(written_files(bad).is_err(), "{bad:?}");
        }
    }
}
