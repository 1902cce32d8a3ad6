//! The book holds together: `scripts/check-book.py` (stdlib Python, no
//! network, a fraction of a second) checks that every page docs/SUMMARY.md
//! lists exists and every page is listed, that every link in README.md and
//! docs/ resolves, that every docs/<page>.md named in src/ exists, and that
//! every heading of the README before the book is a heading somewhere.

use std::process::Command;

#[test]
fn book_links_pages_and_old_headings_hold() {
    let root = env!("CARGO_MANIFEST_DIR");
    let output = Command::new("python3")
        .arg(format!("{root}/scripts/check-book.py"))
        .current_dir(root)
        .output()
        .expect("python3 runs scripts/check-book.py");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "scripts/check-book.py failed:\n{stdout}{stderr}"
    );
}
