//! The real bash as ground truth for issue 22's corpus
//! (`tests/fixtures/bash_adversarial.json`): every line the engine
//! **allows** under the allow-all config with the built-in guards is run
//! with `bash -c` in a throwaway world (cwd, `HOME`, mount point and state
//! dir all under a private temp dir, laid out afresh for each line; no
//! network: `unshare -n`, or a `PATH` whose network tools are stubs) under
//! `strace -f`, and must
//!
//! - execute no program but the command units the engine judged (a
//!   program's basename must be a word of one of the line's units), and
//! - create, write, delete, rename, link or chmod no file but the paths the
//!   facts named (`path*` and `external_directory*` facts; a named path
//!   covers what is below it, and `mkdir` of its ancestors).
//!
//! An `allow` is a promise that the analysis saw everything the line does;
//! this test checks the promise against what bash really does. Skipped,
//! with the reason printed, where strace is missing.

use crate::world::{corpus, printable, setup, Judges, Verdict, World};
use permfs::facts::bash::enumerate;
use std::collections::{HashMap, HashSet};
use std::path::{Component, Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The syscalls that run a program, write a name, or move the cwd (for
/// resolving relative names).
const TRACE: &str = "trace=execve,openat,open,creat,rename,renameat,renameat2,link,linkat,\
symlink,symlinkat,unlink,unlinkat,rmdir,mkdir,mkdirat,truncate,chmod,fchmodat,\
chdir,fchdir,clone,clone3,fork,vfork";
/// A line still running after this is killed (and reported).
const LINE_TIMEOUT: Duration = Duration::from_secs(5);
/// Lines run two at a time (each worker in its own world).
const WORKERS: usize = 2;

fn works(program: &str, args: &[&str]) -> bool {
    Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

/// How lines are kept off the network: a network namespace when one can be
/// made, else stubs for the network tools ahead of the real ones in PATH.
enum Offline {
    Namespace(Vec<&'static str>),
    Stubs(PathBuf),
}

fn offline(stub_dir: &Path) -> Offline {
    for prefix in [vec!["unshare", "-n"], vec!["unshare", "-rn"]] {
        let mut args = prefix[1..].to_vec();
        args.push("true");
        if works(prefix[0], &args) {
            return Offline::Namespace(prefix);
        }
    }
    std::fs::create_dir_all(stub_dir).expect("stub dir");
    for tool in [
        "curl", "wget", "nc", "ncat", "netcat", "ssh", "scp", "sftp", "ftp", "telnet", "socat",
        "rsync",
    ] {
        let path = stub_dir.join(tool);
        std::fs::write(&path, "#!/bin/sh\nexit 1\n").expect("stub");
        let _ = Command::new("chmod").arg("+x").arg(&path).status();
    }
    Offline::Stubs(stub_dir.to_path_buf())
}

/// Lexically normal form of an absolute path (no `.`, `..` resolved).
fn normal(path: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for part in path.components() {
        match part {
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(p) => out.push(p),
            _ => {}
        }
    }
    out
}

fn resolve(base: &str, path: &str) -> PathBuf {
    if path.starts_with('/') {
        normal(Path::new(path))
    } else {
        normal(&Path::new(base).join(path))
    }
}

/// The arguments of a strace call line, split at top-level commas, with
/// strings decoded and `fd</path>` decorations kept as they are.
fn split_args(text: &str) -> Vec<String> {
    let mut args = Vec::new();
    let mut current = String::new();
    let mut depth = 0i32;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' => {
                // A C-escaped string, decoded.
                let mut bytes = Vec::new();
                while let Some(c) = chars.next() {
                    match c {
                        '"' => break,
                        '\\' => match chars.next() {
                            Some('n') => bytes.push(b'\n'),
                            Some('t') => bytes.push(b'\t'),
                            Some('r') => bytes.push(b'\r'),
                            Some('v') => bytes.push(0x0b),
                            Some('f') => bytes.push(0x0c),
                            Some('x') => {
                                let hex: String = (0..2).filter_map(|_| chars.next()).collect();
                                bytes.push(u8::from_str_radix(&hex, 16).unwrap_or(b'?'));
                            }
                            Some(d) if d.is_ascii_digit() => {
                                let mut oct = d.to_string();
                                while oct.len() < 3
                                    && chars.peek().is_some_and(|c| c.is_ascii_digit())
                                {
                                    oct.push(chars.next().unwrap_or('0'));
                                }
                                bytes.push(u8::from_str_radix(&oct, 8).unwrap_or(b'?'));
                            }
                            Some(other) => {
                                let mut buf = [0u8; 4];
                                bytes.extend_from_slice(other.encode_utf8(&mut buf).as_bytes());
                            }
                            None => {}
                        },
                        other => {
                            let mut buf = [0u8; 4];
                            bytes.extend_from_slice(other.encode_utf8(&mut buf).as_bytes());
                        }
                    }
                }
                current.push_str(&String::from_utf8_lossy(&bytes));
            }
            '[' | '{' | '(' | '<' => {
                depth += 1;
                current.push(c);
            }
            ']' | '}' | ')' | '>' => {
                depth -= 1;
                current.push(c);
            }
            ',' if depth <= 0 => {
                args.push(current.trim().to_string());
                current.clear();
            }
            _ => current.push(c),
        }
    }
    if !current.trim().is_empty() {
        args.push(current.trim().to_string());
    }
    args
}

/// The path in a `fd</path>` / `AT_FDCWD</path>` decoration.
fn decoration(text: &str) -> Option<String> {
    let start = text.find("</")?;
    let end = text.rfind('>')?;
    (end > start + 1).then(|| text[start + 1..end].to_string())
}

/// What one traced run did.
#[derive(Default, Debug)]
struct Trace {
    /// Basenames of the programs executed (bash itself excluded).
    programs: Vec<String>,
    /// (syscall, absolute path) of every successful change to a name.
    writes: Vec<(String, PathBuf)>,
    /// (from, to) of every successful rename.
    renames: Vec<(PathBuf, PathBuf)>,
}

fn parse_trace(text: &str, start_cwd: &str) -> Trace {
    let mut trace = Trace::default();
    let mut cwd: HashMap<u32, String> = HashMap::new();
    let mut pending: HashMap<u32, String> = HashMap::new();
    let mut first_exec = true;
    for raw in text.lines() {
        let Some((pid, rest)) = raw.split_once(' ') else {
            continue;
        };
        let Ok(pid) = pid.trim().parse::<u32>() else {
            continue;
        };
        let rest = rest.trim_start();
        let line = if let Some(head) = rest.strip_suffix(" <unfinished ...>") {
            pending.insert(pid, head.to_string());
            continue;
        } else if rest.starts_with("<... ") {
            let Some(after) = rest.split_once("resumed>").map(|(_, a)| a) else {
                continue;
            };
            let head = pending.remove(&pid).unwrap_or_default();
            format!("{head}{after}")
        } else {
            rest.to_string()
        };
        // A pid not seen before (bash itself) starts in the world's cwd;
        // children inherit their parent's (clone/fork below).
        let here = cwd
            .get(&pid)
            .cloned()
            .unwrap_or_else(|| start_cwd.to_string());
        let Some(open) = line.find('(') else {
            continue;
        };
        let name = &line[..open];
        let Some(close) = line.rfind(") = ") else {
            continue;
        };
        let result = line[close + 4..].trim();
        let ok = !result.starts_with('-') && !result.starts_with('?');
        let args = split_args(&line[open + 1..close]);
        // The cwd as the kernel printed it for this pid.
        if let Some(at) = args.iter().find(|a| a.starts_with("AT_FDCWD<")) {
            if let Some(path) = decoration(at) {
                cwd.insert(pid, path);
            }
        }
        let here = cwd.get(&pid).cloned().unwrap_or(here);
        let arg = |i: usize| args.get(i).cloned().unwrap_or_default();
        // A path argument relative to a dirfd argument.
        let at = |dirfd: usize, path: usize| {
            let base = decoration(&arg(dirfd)).unwrap_or_else(|| here.clone());
            resolve(&base, &arg(path))
        };
        let mut renamed = None;
        let mut write = |path: PathBuf| trace.writes.push((name.to_string(), path));
        match name {
            "execve" if ok => {
                if first_exec {
                    first_exec = false;
                } else {
                    let program = arg(0);
                    let base = program.rsplit('/').next().unwrap_or(&program).to_string();
                    trace.programs.push(base);
                }
            }
            "clone" | "clone3" | "fork" | "vfork" if ok => {
                if let Ok(child) = result
                    .split_whitespace()
                    .next()
                    .unwrap_or("")
                    .parse::<u32>()
                {
                    cwd.insert(child, here.clone());
                }
            }
            "chdir" if ok => {
                cwd.insert(pid, resolve(&here, &arg(0)).to_string_lossy().into_owned());
            }
            "fchdir" if ok => {
                if let Some(path) = decoration(&arg(0)) {
                    cwd.insert(pid, path);
                }
            }
            "openat" | "open" | "creat" if ok => {
                let flags = if name == "openat" { arg(2) } else { arg(1) };
                let writes = name == "creat"
                    || ["O_WRONLY", "O_RDWR", "O_CREAT", "O_TRUNC", "O_APPEND"]
                        .iter()
                        .any(|f| flags.contains(f));
                if writes {
                    let path = decoration(result).map(PathBuf::from).unwrap_or_else(|| {
                        if name == "openat" {
                            at(0, 1)
                        } else {
                            resolve(&here, &arg(0))
                        }
                    });
                    write(path);
                }
            }
            "mkdir" | "unlink" | "rmdir" | "truncate" | "chmod" if ok => {
                write(resolve(&here, &arg(0)));
            }
            "mkdirat" | "unlinkat" | "fchmodat" if ok => write(at(0, 1)),
            "rename" if ok => {
                let (from, to) = (resolve(&here, &arg(0)), resolve(&here, &arg(1)));
                write(from.clone());
                write(to.clone());
                renamed = Some((from, to));
            }
            "renameat" | "renameat2" if ok => {
                let (from, to) = (at(0, 1), at(2, 3));
                write(from.clone());
                write(to.clone());
                renamed = Some((from, to));
            }
            "link" | "symlink" if ok => write(resolve(&here, &arg(1))),
            "linkat" if ok => write(at(2, 3)),
            "symlinkat" if ok => write(at(1, 2)),
            _ => {}
        }
        trace.renames.extend(renamed);
    }
    trace
}

/// The words of the units the engine judged, as program basenames.
fn unit_words(line: &str) -> HashSet<String> {
    let mut words = HashSet::new();
    for unit in enumerate(line).units {
        for word in unit
            .text
            .split(|c: char| c.is_whitespace() || ";|&(){}`".contains(c))
        {
            let word: String = word.chars().filter(|c| !"'\"\\".contains(*c)).collect();
            if word.is_empty() {
                continue;
            }
            words.insert(word.rsplit('/').next().unwrap_or(&word).to_string());
        }
    }
    words
}

/// The paths the facts named, absolute, lexically normal; glob patterns
/// kept as patterns.
fn named_paths(facts: &permfs::facts::request::FactSet, cwd: &str) -> Vec<String> {
    let mut named = Vec::new();
    for intent in &facts.intents {
        if !(intent.surface.starts_with("path") || intent.surface.starts_with("external_directory"))
        {
            continue;
        }
        for value in intent.match_values.iter() {
            let path = resolve(cwd, value).to_string_lossy().into_owned();
            if !named.contains(&path) {
                named.push(path);
            }
        }
    }
    named
}

fn covered(syscall: &str, path: &Path, named: &[String]) -> bool {
    let text = path.to_string_lossy();
    named.iter().any(|n| {
        let below = text == n.as_str() || text.starts_with(&format!("{n}/"));
        let ancestor =
            (syscall == "mkdir" || syscall == "mkdirat") && n.starts_with(&format!("{text}/"));
        let pattern = n.contains(['*', '?', '['])
            && globset::GlobBuilder::new(n)
                .literal_separator(true)
                .build()
                .map(|g| g.compile_matcher().is_match(path))
                .unwrap_or(false);
        below || ancestor || pattern
    })
}

/// How the lines are run: the same for every worker.
struct Runner {
    offline: Offline,
    scratch: PathBuf,
}

/// Runs one allowed line in `world` under strace; what it did beyond the
/// facts, if anything.
fn run_line(
    runner: &Runner,
    world: &World,
    index: usize,
    line: &str,
    verdict: &Verdict,
) -> Vec<String> {
    world.reset();
    let path_var = match &runner.offline {
        Offline::Stubs(dir) => format!("{}:/usr/local/bin:/usr/bin:/bin", dir.display()),
        Offline::Namespace(_) => "/usr/local/bin:/usr/bin:/bin".to_string(),
    };
    let tmpdir = world.tmp.join("tmpdir");
    let cwd = world.cwd_text();
    let out = runner.scratch.join(format!("trace-{index}.txt"));
    let mut command = match &runner.offline {
        Offline::Namespace(prefix) => {
            let mut c = Command::new(prefix[0]);
            c.args(&prefix[1..]).arg("strace");
            c
        }
        Offline::Stubs(_) => Command::new("strace"),
    };
    command
        .args(["-f", "-qq", "-y", "-s", "4096", "-e", TRACE, "-o"])
        .arg(&out)
        .args(["bash", "-c", line])
        .current_dir(&world.cwd)
        .env_clear()
        .env("HOME", &world.home)
        .env("PATH", &path_var)
        .env("TMPDIR", &tmpdir)
        .env("OLDPWD", &world.cwd)
        .env("PWD", &world.cwd)
        .env("LANG", "C")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    std::os::unix::process::CommandExt::process_group(&mut command, 0);
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(error) => return vec![format!("could not run strace: {error}")],
    };
    let begun = Instant::now();
    let mut wrong = Vec::new();
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if begun.elapsed() > LINE_TIMEOUT => {
                // Only the process group this test started.
                let _ = Command::new("kill")
                    .args(["-KILL", "--", &format!("-{}", child.id())])
                    .status();
                let _ = child.wait();
                wrong.push(format!("still running after {LINE_TIMEOUT:?}"));
                break;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(2)),
            Err(_) => break,
        }
    }
    let text = std::fs::read_to_string(&out).unwrap_or_default();
    let _ = std::fs::remove_file(&out);
    let trace = parse_trace(&text, &cwd);
    let words = unit_words(line);
    let named = named_paths(&verdict.facts, &cwd);
    for program in &trace.programs {
        if !words.contains(program) {
            wrong.push(format!("ran {program:?}, which no judged unit names"));
        }
    }
    for (syscall, path) in &trace.writes {
        let text = path.to_string_lossy();
        let bash_internal = text.starts_with("/dev/")
            || text.starts_with("/proc/")
            || (path.starts_with(&tmpdir)
                && path
                    .file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("sh-thd")));
        // A temp file renamed onto a named path (sed -i, install) is the
        // named write.
        let staged = trace
            .renames
            .iter()
            .any(|(from, to)| from == path && covered("rename", to, &named));
        if !bash_internal && !staged && !covered(syscall, path, &named) {
            wrong.push(format!("{syscall} {text}, which no fact names"));
        }
    }
    wrong.dedup();
    if !wrong.is_empty() {
        wrong.push(format!(
            "units: {:?}",
            enumerate(line)
                .units
                .iter()
                .map(|u| u.text.clone())
                .collect::<Vec<_>>()
        ));
        wrong.push(format!("named: {named:?}"));
    }
    wrong
}

#[test]
fn what_the_engine_allows_does_only_what_its_facts_say() {
    if !works("strace", &["-V"]) {
        eprintln!(
            "SKIPPED: strace is not installed (apt-get install strace); the ground truth needs it"
        );
        return;
    }
    if !works("bash", &["-c", "true"]) {
        eprintln!("SKIPPED: bash is not runnable");
        return;
    }
    let corpus = corpus();
    // Two workers, each with its own world (and home: the judges read HOME
    // when they are made, so each pair is made before the next world).
    let worlds: Vec<(World, Judges)> = (0..WORKERS).map(|_| setup(corpus.layout.clone())).collect();
    let scratch = tempfile::tempdir().expect("scratch dir");
    let runner = Runner {
        offline: offline(&scratch.path().join("stubs")),
        scratch: scratch.path().to_path_buf(),
    };
    let started = Instant::now();
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results: Vec<(usize, usize, Vec<String>)> = std::thread::scope(|scope| {
        let workers: Vec<_> = worlds
            .iter()
            .map(|(world, judges)| {
                let (next, runner, corpus) = (&next, &runner, &corpus);
                scope.spawn(move || {
                    let mut found = Vec::new();
                    loop {
                        let index = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(entry) = corpus.entries.get(index) else {
                            break;
                        };
                        let line = world.expand(&entry.line);
                        let verdict = judges.judge(true, &line);
                        if verdict.state != "allow" {
                            continue;
                        }
                        found.push((index, 1, run_line(runner, world, index, &line, &verdict)));
                    }
                    world.reset();
                    found
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().unwrap_or_default())
            .collect()
    });
    let ran = results.len();
    let mut failures: Vec<(usize, String)> = results
        .into_iter()
        .filter(|(_, _, wrong)| !wrong.is_empty())
        .map(|(index, _, wrong)| {
            let entry = &corpus.entries[index];
            (
                index,
                format!(
                    "[{}] {}\n    {}",
                    entry.class,
                    printable(&entry.line),
                    wrong.join("\n    ")
                ),
            )
        })
        .collect();
    failures.sort();
    eprintln!(
        "bash ground truth: {ran} allowed lines run under strace in {:.1}s",
        started.elapsed().as_secs_f64()
    );
    assert!(
        failures.is_empty(),
        "{} of {ran} allowed lines did more than the engine saw:\n{}",
        failures.len(),
        failures
            .into_iter()
            .map(|(_, f)| f)
            .collect::<Vec<_>>()
            .join("\n")
    );
}
