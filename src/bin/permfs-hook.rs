//! `permfs-hook`: `permfs hook` as a binary of its own.
//!
//! The agent waits for the hook's whole process before every tool call,
//! and most of a small process's start is the dynamic loader relocating
//! the binary: `permfs` carries the policy engine, tree-sitter, FUSE and
//! the prompt (about 20,000 relative relocations), while this carries only
//! what a hook event needs (about 1,800), which saves some 0.5 ms a call
//! (BENCHMARKS.md section 9). `permfs hook --print-config` and
//! `permfs hook install` name this binary when it lies beside `permfs`,
//! so the line reads `…/permfs-hook hook --agent …` (the word `hook` is
//! accepted and skipped, so a line is recognised as permfs's either way).

fn main() {
    let mut args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if args.get(1).is_some_and(|a| a == "hook") {
        args.remove(1);
    }
    std::process::exit(permfs::cli::hook::main(args));
}
