//! `permfs prompt`: a terminal approval agent for the person deciding.
//!
//! It is only a client of the mount: the queue is the session's `pending`
//! listing (every ask waiting at the session or below that this person may
//! decide, oldest first), new asks arrive through the session's `events`
//! stream (a blocking read, no polling), and a decision is a write to the
//! ask's inbox file like any other, so the daemon's rules, checks and
//! errors apply unchanged. Everything the agent supplied is shown through
//! [`super::untrusted::visible`], and its message apart from the facts.

use super::untrusted::{visible, visible_lines};
use crate::session::authority::{breadth, Breadth};
use crossterm::event::{self, Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use ratatui::layout::{Constraint, Direction, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Wrap};
use ratatui::Frame;
use serde_json::Value;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

#[derive(Debug, clap::Args)]
pub struct PromptArgs {
    /// The session directory to decide for (its asks and every ask below
    /// it that you may decide). Default: mount/sessions/main when it
    /// exists, else the current directory.
    pub session_dir: Option<PathBuf>,
    /// Also send a desktop notification (`notify-send`, when installed)
    /// for each new ask.
    #[arg(long)]
    pub notify: bool,
}

pub fn run(args: PromptArgs) -> i32 {
    let dir = args.session_dir.unwrap_or_else(|| {
        let default = PathBuf::from("mount/sessions/main");
        if default.join("pending").exists() {
            default
        } else {
            PathBuf::from(".")
        }
    });
    // Fail before taking over the terminal when the queue is unreadable.
    if let Err(error) = load(&dir) {
        eprintln!("permfs prompt: {error}");
        return 1;
    }
    let mut terminal = match ratatui::try_init() {
        Ok(terminal) => terminal,
        Err(error) => {
            eprintln!("permfs prompt: the terminal cannot be used: {error}");
            return 1;
        }
    };
    let result = App::new(dir, args.notify).run(&mut terminal);
    ratatui::restore();
    match result {
        Ok(()) => 0,
        Err(error) => {
            eprintln!("permfs prompt: {error}");
            1
        }
    }
}

/// What wakes the main loop.
enum Wake {
    Key(KeyEvent),
    Redraw,
    /// Something changed in an inbox; `true` when an ask arrived.
    Changed(bool),
    /// The event stream ended or could not be read (why).
    StreamEnded(String),
    /// What the daemon added to a config file for an `allow always`.
    Note(String),
}

/// Which kind of allow the pattern editor records.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Grant {
    Session,
    Subagent,
    /// `allow always global`: a rule in the global config.
    Always,
}

enum Mode {
    Browse,
    /// Editing the patterns of an `allow session` (or `subagent`) grant,
    /// one per line, before it is recorded.
    Patterns {
        kind: Grant,
        lines: Vec<String>,
        row: usize,
    },
    /// Typing the reason of a deny.
    Reason(String),
}

struct App {
    dir: PathBuf,
    notify: bool,
    asks: Vec<Value>,
    /// Asks waiting beyond the listing's bound (`limits.pendingShown`).
    more: u64,
    hidden: u64,
    selected: usize,
    scroll: u16,
    mode: Mode,
    status: Line<'static>,
    live: Option<String>,
    /// The ask last drawn under the cursor, since when, and whether the
    /// person's own move put it there: a decision key acts only on the
    /// ask drawn, and not in the first moments after it changed under the
    /// cursor by itself (a key in flight was meant for the one before).
    shown: Option<(String, std::time::Instant, bool)>,
    /// Set by a move key until the next draw.
    moved: bool,
}

/// How long an ask that came under the cursor by itself (after a decision
/// moved on) is shown before a decision key acts on it.
const SETTLE: Duration = Duration::from_millis(300);

/// The session's `pending` listing.
/// The session's `pending` listing: the asks listed, how many more wait
/// beyond the listing's bound, and how many wait where this person may
/// not decide.
fn load(dir: &Path) -> Result<(Vec<Value>, u64, u64), String> {
    let path = dir.join("pending");
    let bytes = std::fs::read(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let view: Value = serde_json::from_slice(&bytes)
        .map_err(|e| format!("{} is not the pending listing: {e}", path.display()))?;
    let asks = view["pending"].as_array().cloned().unwrap_or_default();
    Ok((
        asks,
        view["more"].as_u64().unwrap_or(0),
        view["notShown"].as_u64().unwrap_or(0),
    ))
}

fn text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// What will be allowed, in one line, built from the facts permfs fixed
/// (what rules and grants are judged on), never from the agent's own
/// input fields: a `write` that also carries a harmless `command` shows
/// the path it writes. The fact on the tool's (or surface's) own surface
/// is the thing itself (a write's absolute path, a bash line); without one,
/// every distinct first value of the facts; with no facts at all, a
/// warning that permfs could check nothing.
fn what(ask: &Value) -> String {
    let asked = &ask["asked"];
    let facts: Vec<&Value> = ask["facts"].as_array().into_iter().flatten().collect();
    let head = asked["tool"]
        .as_str()
        .or_else(|| asked["surface"].as_str())
        .or_else(|| facts.first().and_then(|f| f["surface"].as_str()))
        .unwrap_or("(pre-fixed facts)")
        .to_string();
    let first = |fact: &Value| text(&fact["matchValues"][0]);
    if let Some(own) = facts
        .iter()
        .find(|f| f["surface"].as_str() == Some(head.as_str()))
    {
        return format!("{head} {}", first(own));
    }
    let mut values: Vec<String> = Vec::new();
    for fact in &facts {
        let value = first(fact);
        if !values.contains(&value) {
            values.push(value);
        }
    }
    if values.is_empty() {
        return format!("{head} (no facts: permfs could check nothing of this ask)");
    }
    format!("{head} {}", values.join("  ·  "))
}

/// A queue entry kept only to show that its ask left (`reload_keeping`).
fn is_withdrawn(ask: &Value) -> bool {
    ask["withdrawn"] == Value::Bool(true)
}

fn now_ms() -> u64 {
    crate::session::ask::now_ms()
}

fn duration(ms: u64) -> String {
    let s = ms / 1000;
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
    }
}

fn patterns_of(ask: &Value, key: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for grant in ask[key].as_array().into_iter().flatten() {
        let pattern = text(&grant["pattern"]);
        if !out.contains(&pattern) {
            out.push(pattern);
        }
    }
    out
}

/// The patterns an `s`/`u`/`A` editor starts with: the suggestion only
/// when none of it is broader than what permfs derived from the facts,
/// else the derived patterns. The person types anything broader.
fn prefill(ask: &serde_json::Value) -> Vec<String> {
    let derived = patterns_of(ask, "derivedGrants");
    let suggested = patterns_of(ask, "suggestedGrants");
    let within = suggested
        .iter()
        .all(|p| matches!(breadth(p, &derived), Breadth::Same | Breadth::Narrower));
    if within {
        suggested
    } else {
        derived
    }
}

fn breadth_note(pattern: &str, derived: &[String]) -> Span<'static> {
    match breadth(pattern, derived) {
        Breadth::Same => Span::styled("  [as suggested]", Style::default().fg(Color::Green)),
        Breadth::Narrower => Span::styled("  [narrower]", Style::default().fg(Color::Green)),
        Breadth::Broader => Span::styled(
            "  [BROADER than suggested]",
            Style::default().fg(Color::Red).add_modifier(Modifier::BOLD),
        ),
        Breadth::Elsewhere => Span::styled(
            "  [ELSEWHERE: not what was asked]",
            Style::default().fg(Color::Red).add_modifier(Modifier::BOLD),
        ),
    }
}

/// Runs `notify-send` when it is installed; a failure is only logged.
fn desktop_notification(ask: &Value) {
    let found = std::env::var_os("PATH")
        .map(|paths| std::env::split_paths(&paths).any(|p| p.join("notify-send").is_file()))
        .unwrap_or(false);
    if !found {
        return;
    }
    // Notification servers may read markup: only escaped, markup-free text.
    let body = visible(&format!("{} asks: {}", text(&ask["from"]), what(ask)))
        .replace(['<', '>', '&'], "_");
    if let Err(error) = std::process::Command::new("notify-send")
        .args(["--app-name=permfs", "permfs: an ask waits", &body])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
    {
        tracing::debug!(%error, "notify-send failed");
    }
}

/// Reads the session's event stream and wakes the loop on every change.
fn watch_events(dir: PathBuf, wake: mpsc::Sender<Wake>) {
    let path = dir.join("events");
    let mut stream = match std::fs::File::open(&path) {
        Ok(file) => file,
        Err(error) => {
            let _ = wake.send(Wake::StreamEnded(format!(
                "no live updates ({}: {error})",
                path.display()
            )));
            return;
        }
    };
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        match stream.read(&mut buffer) {
            Ok(0) => {
                let _ = wake.send(Wake::StreamEnded("the session ended".into()));
                return;
            }
            Ok(n) => {
                let chunk = String::from_utf8_lossy(&buffer[..n]);
                for event in chunk
                    .lines()
                    .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                {
                    if event["event"] == "always" {
                        let added: Vec<String> = event["added"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .map(text)
                            .collect();
                        let note =
                            format!("added to {}: {}", text(&event["file"]), added.join("; "));
                        if wake.send(Wake::Note(note)).is_err() {
                            return;
                        }
                    }
                }
                let arrived = chunk.lines().any(|line| {
                    serde_json::from_str::<Value>(line).is_ok_and(|e| {
                        e["event"] == "arrived"
                            || (e["event"] == "below" && e["change"] == "arrived")
                    })
                });
                if wake.send(Wake::Changed(arrived)).is_err() {
                    return;
                }
            }
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(error) => {
                let _ = wake.send(Wake::StreamEnded(format!("no live updates: {error}")));
                return;
            }
        }
    }
}

fn read_keys(wake: mpsc::Sender<Wake>) {
    loop {
        let sent = match event::read() {
            Ok(Event::Key(key)) if key.kind != KeyEventKind::Release => wake.send(Wake::Key(key)),
            Ok(Event::Resize(..)) => wake.send(Wake::Redraw),
            Ok(_) => Ok(()),
            Err(_) => return,
        };
        if sent.is_err() {
            return;
        }
    }
}

impl App {
    fn new(dir: PathBuf, notify: bool) -> Self {
        Self {
            dir,
            notify,
            asks: Vec::new(),
            more: 0,
            hidden: 0,
            selected: 0,
            scroll: 0,
            mode: Mode::Browse,
            status: Line::from("q quits without deciding anything"),
            live: None,
            shown: None,
            moved: false,
        }
    }

    /// Reloads the queue. The selected ask keeps the cursor; when it left
    /// without this prompt deciding it (withdrawn, timed out, decided
    /// elsewhere) it stays shown in its place, marked withdrawn, until the
    /// person moves on: the cursor never jumps to another ask by itself.
    fn reload(&mut self) {
        self.reload_keeping(true);
    }

    fn reload_keeping(&mut self, keep_gone: bool) {
        let current = self.current().cloned();
        match load(&self.dir) {
            Ok((asks, more, hidden)) => {
                self.asks = asks;
                self.more = more;
                self.hidden = hidden;
            }
            Err(error) => self.status = Line::styled(error, Style::default().fg(Color::Red)),
        }
        if let Some(current) = current {
            let id = text(&current["askId"]);
            if let Some(i) = self.asks.iter().position(|a| text(&a["askId"]) == id) {
                self.selected = i;
                return;
            }
            if keep_gone {
                let mut gone = current;
                if let Value::Object(object) = &mut gone {
                    object.insert("withdrawn".into(), Value::Bool(true));
                }
                self.selected = self.selected.min(self.asks.len());
                self.asks.insert(self.selected, gone);
                return;
            }
            self.scroll = 0;
        }
        self.selected = self.selected.min(self.asks.len().saturating_sub(1));
    }

    /// Takes a withdrawn ask out of the queue (the person moves on);
    /// `true` when there was one under the cursor.
    fn drop_withdrawn(&mut self) -> bool {
        let gone = self.current().is_some_and(is_withdrawn);
        if gone {
            self.asks.remove(self.selected);
        }
        self.asks.retain(|a| !is_withdrawn(a));
        gone
    }

    /// Why a decision key must not act now, if it must not.
    fn not_now(&self) -> Option<&'static str> {
        let current = self.current()?;
        if is_withdrawn(current) {
            return Some(
                "this ask no longer waits (withdrawn or decided elsewhere): nothing decided",
            );
        }
        match &self.shown {
            Some((id, _, _)) if *id != text(&current["askId"]) => {
                Some("the ask under the cursor changed before it was shown: nothing decided")
            }
            Some((_, since, false)) if since.elapsed() < SETTLE => {
                Some("the ask under the cursor just changed: nothing decided, look again")
            }
            _ => None,
        }
    }

    /// Records which ask the frame just drawn shows under the cursor.
    fn note_shown(&mut self) {
        let id = self.current().map(|a| text(&a["askId"]));
        let moved = std::mem::take(&mut self.moved);
        match (&self.shown, id) {
            (Some((shown, _, _)), Some(id)) if *shown == id => {}
            (_, Some(id)) => self.shown = Some((id, std::time::Instant::now(), moved)),
            (_, None) => self.shown = None,
        }
    }

    fn current(&self) -> Option<&Value> {
        self.asks.get(self.selected)
    }

    fn run(mut self, terminal: &mut ratatui::DefaultTerminal) -> Result<(), String> {
        let (wake, woken) = mpsc::channel();
        let events = wake.clone();
        let dir = self.dir.clone();
        std::thread::spawn(move || watch_events(dir, events));
        std::thread::spawn(move || read_keys(wake));
        self.reload();
        let mut backlog: std::collections::VecDeque<Wake> = std::collections::VecDeque::new();
        loop {
            terminal
                .draw(|frame| self.draw(frame))
                .map_err(|e| format!("cannot draw: {e}"))?;
            self.note_shown();
            // The timeout only redraws the countdowns; the queue changes
            // on events.
            let wake = match backlog.pop_front() {
                Some(wake) => wake,
                None => match woken.recv_timeout(Duration::from_secs(1)) {
                    Ok(wake) => wake,
                    Err(mpsc::RecvTimeoutError::Timeout) => Wake::Redraw,
                    Err(mpsc::RecvTimeoutError::Disconnected) => return Ok(()),
                },
            };
            match wake {
                Wake::Redraw => {}
                Wake::Changed(mut arrived) => {
                    // A burst of changes is one reload: every change already
                    // queued is folded in (a key or note queued after them
                    // is handled next, in order).
                    while let Ok(next) = woken.try_recv() {
                        match next {
                            Wake::Changed(more) => arrived |= more,
                            other => {
                                backlog.push_back(other);
                                break;
                            }
                        }
                    }
                    let before: Vec<String> = self.asks.iter().map(|a| text(&a["askId"])).collect();
                    self.reload();
                    let new: Vec<&Value> = self
                        .asks
                        .iter()
                        .filter(|a| !before.contains(&text(&a["askId"])))
                        .collect();
                    if arrived && !new.is_empty() {
                        // The terminal bell: tmux and ssh pass it on.
                        let mut out = std::io::stdout();
                        let _ = out.write_all(b"\x07").and_then(|()| out.flush());
                        if self.notify {
                            for ask in new {
                                desktop_notification(ask);
                            }
                        }
                    }
                }
                Wake::StreamEnded(why) => self.live = Some(why),
                Wake::Note(note) => {
                    self.status = Line::styled(visible(&note), Style::default().fg(Color::Green));
                }
                Wake::Key(key) => {
                    if !self.key(key) {
                        return Ok(());
                    }
                }
            }
        }
    }

    /// Handles a key; `false` to quit.
    fn key(&mut self, key: KeyEvent) -> bool {
        if key.modifiers.contains(KeyModifiers::CONTROL) && key.code == KeyCode::Char('c') {
            return false;
        }
        match &mut self.mode {
            Mode::Browse => return self.browse_key(key),
            Mode::Reason(reason) => match key.code {
                KeyCode::Esc => self.mode = Mode::Browse,
                KeyCode::Enter => {
                    let reason = reason.trim().to_string();
                    self.mode = Mode::Browse;
                    let decision = if reason.is_empty() {
                        serde_json::json!({"decision": "deny"})
                    } else {
                        serde_json::json!({"decision": "deny", "reason": reason})
                    };
                    self.decide(decision, "denied with a reason");
                }
                KeyCode::Backspace => {
                    reason.pop();
                }
                KeyCode::Char(c) => reason.push(c),
                _ => {}
            },
            Mode::Patterns { kind, lines, row } => match key.code {
                KeyCode::Esc => self.mode = Mode::Browse,
                KeyCode::Enter => {
                    let patterns: Vec<String> =
                        lines.iter().filter(|l| !l.is_empty()).cloned().collect();
                    let (decision, done) = match kind {
                        Grant::Session => (
                            serde_json::json!({"decision": "allow session", "patterns": patterns}),
                            "allowed for the session",
                        ),
                        Grant::Subagent => (
                            serde_json::json!({"decision": "allow subagent", "patterns": patterns}),
                            "allowed for the subagent",
                        ),
                        Grant::Always => (
                            serde_json::json!({"decision": "allow always", "layer": "global", "patterns": patterns}),
                            "allowed always (rule added to the global config)",
                        ),
                    };
                    self.mode = Mode::Browse;
                    self.decide(decision, done);
                }
                KeyCode::Tab => {
                    lines.insert(*row + 1, String::new());
                    *row += 1;
                }
                KeyCode::Up => *row = row.saturating_sub(1),
                KeyCode::Down => *row = (*row + 1).min(lines.len().saturating_sub(1)),
                KeyCode::Backspace => {
                    if let Some(line) = lines.get_mut(*row) {
                        if line.pop().is_none() && lines.len() > 1 {
                            lines.remove(*row);
                            *row = row.saturating_sub(1);
                        }
                    }
                }
                KeyCode::Char('u') if key.modifiers.contains(KeyModifiers::CONTROL) => {
                    if let Some(line) = lines.get_mut(*row) {
                        line.clear();
                    }
                }
                KeyCode::Char(c) => {
                    if let Some(line) = lines.get_mut(*row) {
                        line.push(c);
                    }
                }
                _ => {}
            },
        }
        true
    }

    fn browse_key(&mut self, key: KeyEvent) -> bool {
        let count = self.asks.len();
        match key.code {
            KeyCode::Char('q') | KeyCode::Esc => return false,
            KeyCode::Up | KeyCode::Char('k') => {
                self.drop_withdrawn();
                self.selected = self.selected.saturating_sub(1);
                self.scroll = 0;
                self.moved = true;
            }
            KeyCode::Down | KeyCode::Char('j') => {
                if !self.drop_withdrawn() {
                    self.selected += 1;
                }
                self.selected = self.selected.min(self.asks.len().saturating_sub(1));
                self.scroll = 0;
                self.moved = true;
            }
            KeyCode::Char('n') if count > 0 => {
                if !self.drop_withdrawn() {
                    self.selected += 1;
                }
                self.selected = self.selected.checked_rem(self.asks.len()).unwrap_or(0);
                self.scroll = 0;
                self.moved = true;
                self.status = Line::from("skipped: nothing decided");
            }
            KeyCode::PageDown => self.scroll = self.scroll.saturating_add(5),
            KeyCode::PageUp => self.scroll = self.scroll.saturating_sub(5),
            _ if self.current().is_none() => {}
            KeyCode::Char('a' | 'd' | 'r' | 's' | 'u' | 'A') if self.not_now().is_some() => {
                let why = self.not_now().unwrap_or_default();
                self.status = Line::styled(why, Style::default().fg(Color::Red));
            }
            KeyCode::Char('a') => {
                self.decide(serde_json::json!({"decision": "allow"}), "allowed once")
            }
            KeyCode::Char('d') => self.decide(serde_json::json!({"decision": "deny"}), "denied"),
            KeyCode::Char('r') => self.mode = Mode::Reason(String::new()),
            KeyCode::Char(c @ ('s' | 'u' | 'A')) => {
                let mut lines = self.current().map(prefill).unwrap_or_default();
                if lines.is_empty() {
                    lines.push(String::new());
                }
                self.mode = Mode::Patterns {
                    kind: match c {
                        's' => Grant::Session,
                        'u' => Grant::Subagent,
                        _ => Grant::Always,
                    },
                    row: lines.len() - 1,
                    lines,
                };
            }
            _ => {}
        }
        true
    }

    /// Writes `decision` to the selected ask's inbox file and shows what
    /// the daemon said.
    fn decide(&mut self, mut decision: Value, done: &str) {
        let Some(ask) = self.current().cloned() else {
            return;
        };
        // Bound to what was shown: the daemon refuses the decision unless
        // the ask behind this inbox name holds these very facts.
        if let (Value::Object(object), Some(digest)) = (&mut decision, ask["factsDigest"].as_str())
        {
            object.insert("factsDigest".into(), Value::String(digest.to_string()));
        }
        let id = visible(&text(&ask["askId"]));
        let path = self.dir.join(text(&ask["inbox"]));
        let written = std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .and_then(|mut file| file.write_all(decision.to_string().as_bytes()));
        let red = Style::default().fg(Color::Red).add_modifier(Modifier::BOLD);
        let decided = written.is_ok();
        self.status = match written {
            Ok(()) => Line::styled(format!("{done}: {id}"), Style::default().fg(Color::Green)),
            Err(error) => {
                // The daemon keeps its reason on the entry (`lastError`).
                self.reload();
                let why = self
                    .asks
                    .iter()
                    .find(|a| text(&a["askId"]) == text(&ask["askId"]))
                    .map(|a| text(&a["lastError"]))
                    .unwrap_or_default();
                let reason = match error.raw_os_error() {
                    Some(libc::EINVAL) => format!("refused (EINVAL): {}", visible(&why)),
                    Some(libc::EALREADY) | Some(libc::ENOENT) => {
                        "already decided, or no longer waiting (EALREADY)".into()
                    }
                    Some(libc::EACCES) if !why.is_empty() => {
                        format!("refused (EACCES): {}", visible(&why))
                    }
                    Some(libc::EACCES) => "you may not decide there (EACCES)".into(),
                    _ => format!("not recorded: {error}"),
                };
                Line::styled(format!("{id}: {reason}"), red)
            }
        };
        // The ask this prompt decided leaves the queue; the next one comes
        // under the cursor by itself (so `SETTLE` applies to it).
        self.reload_keeping(!decided);
    }

    fn draw(&self, frame: &mut Frame) {
        let editor_rows = match &self.mode {
            Mode::Patterns { lines, .. } => lines.len() as u16 + 3,
            Mode::Reason(_) => 3,
            Mode::Browse => 0,
        };
        let queue_rows = (self.asks.len() as u16).clamp(1, 8) + 2;
        let keys = match self.mode {
            Mode::Browse => "a allow once  s allow session (edit)  u allow subagent (edit)  A allow always: global config (edit)  d deny  r deny with reason  n skip  ↑↓ select  PgUp/PgDn scroll  q quit",
            Mode::Patterns { .. } => "Enter record  Tab new pattern  ↑↓ line  Backspace  Ctrl-U clear line  Esc cancel",
            Mode::Reason(_) => "Enter deny with this reason  Esc cancel",
        };
        // The footer grows with a long status (a daemon's refusal), so it
        // wraps instead of being cut.
        let width = frame.area().width.max(1) as usize;
        let rows = |text: usize| text.div_ceil(width).max(1) as u16;
        let footer_rows = (1 + rows(keys.chars().count()) + rows(self.status.width())).min(10);
        let areas = Layout::default()
            .direction(Direction::Vertical)
            .constraints([
                Constraint::Length(queue_rows),
                Constraint::Min(6),
                Constraint::Length(editor_rows),
                Constraint::Length(footer_rows),
            ])
            .split(frame.area());
        self.draw_queue(frame, areas[0]);
        self.draw_ask(frame, areas[1]);
        self.draw_editor(frame, areas[2]);
        let footer = Paragraph::new(vec![Line::from(keys), self.status.clone()])
            .block(Block::default().borders(Borders::TOP))
            .wrap(Wrap { trim: false });
        frame.render_widget(footer, areas[3]);
    }

    fn draw_queue(&self, frame: &mut Frame, area: Rect) {
        let now = now_ms();
        let mut title = format!(
            " permfs prompt: {} waiting at or below {} ",
            self.asks.iter().filter(|a| !is_withdrawn(a)).count(),
            visible(&self.dir.display().to_string())
        );
        if self.more > 0 {
            title.push_str(&format!(
                "(and {} more, listed as older ones leave) ",
                self.more
            ));
        }
        if self.hidden > 0 {
            title.push_str(&format!("({} more you may not decide) ", self.hidden));
        }
        if let Some(why) = &self.live {
            title.push_str(&format!("[{}] ", visible(why)));
        }
        let visible_rows = area.height.saturating_sub(2) as usize;
        let first = self.selected.saturating_sub(visible_rows.saturating_sub(1));
        let lines: Vec<Line> = if self.asks.is_empty() {
            vec![Line::from("nothing waits; new asks appear here")]
        } else {
            self.asks
                .iter()
                .enumerate()
                .skip(first)
                .take(visible_rows)
                .map(|(i, ask)| {
                    let age = now.saturating_sub(ask["arrivedAt"].as_u64().unwrap_or(now));
                    let row = format!(
                        "{} {:>2}. {:>6} {}  {}  from {}  {}",
                        if i == self.selected { '>' } else { ' ' },
                        i + 1,
                        duration(age),
                        if is_withdrawn(ask) {
                            "WITHDRAWN"
                        } else {
                            "ago"
                        },
                        visible(&text(&ask["askId"])),
                        visible(&text(&ask["from"])),
                        visible(&what(ask)),
                    );
                    // A row longer than the pane ends in a visible `…`;
                    // the whole value is in the facts below, wrapped.
                    let room = area.width.saturating_sub(2) as usize;
                    let row = if row.chars().count() > room {
                        let mut cut: String = row.chars().take(room.saturating_sub(1)).collect();
                        cut.push('…');
                        cut
                    } else {
                        row
                    };
                    if i == self.selected {
                        Line::styled(row, Style::default().add_modifier(Modifier::REVERSED))
                    } else {
                        Line::from(row)
                    }
                })
                .collect()
        };
        let queue =
            Paragraph::new(lines).block(Block::default().borders(Borders::ALL).title(title));
        frame.render_widget(queue, area);
    }

    fn draw_ask(&self, frame: &mut Frame, area: Rect) {
        let Some(ask) = self.current() else {
            frame.render_widget(Block::default().borders(Borders::ALL), area);
            return;
        };
        let message = ask["message"].as_str().map(visible_lines);
        let message_rows = message
            .as_ref()
            .map(|m| (m.len() as u16 + 2).min(area.height / 2).max(3))
            .unwrap_or(0);
        let parts = Layout::default()
            .direction(Direction::Vertical)
            .constraints([Constraint::Min(3), Constraint::Length(message_rows)])
            .split(area);
        let facts = self.facts_lines(ask);
        let paragraph = Paragraph::new(facts).wrap(Wrap { trim: false });
        let inner_width = parts[0].width.saturating_sub(2);
        let total = paragraph.line_count(inner_width) as u16;
        let room = parts[0].height.saturating_sub(2);
        let scroll = self.scroll.min(total.saturating_sub(room));
        let more = if total > room + scroll {
            " more below: PgDn "
        } else {
            ""
        };
        let title = format!(" the facts (from permfs) {more}");
        frame.render_widget(
            paragraph
                .scroll((scroll, 0))
                .block(Block::default().borders(Borders::ALL).title(title)),
            parts[0],
        );
        if let Some(message) = message {
            let lines: Vec<Line> = message
                .into_iter()
                .map(|l| Line::styled(l, Style::default().fg(Color::Magenta)))
                .collect();
            let block = Block::default()
                .borders(Borders::ALL)
                .title(" message from the agent (untrusted: not checked by permfs) ");
            frame.render_widget(
                Paragraph::new(lines)
                    .wrap(Wrap { trim: false })
                    .block(block),
                parts[1],
            );
        }
    }

    fn facts_lines(&self, ask: &Value) -> Vec<Line<'static>> {
        let label = |s: &str| {
            Span::styled(
                format!("{s:<9}"),
                Style::default().add_modifier(Modifier::BOLD),
            )
        };
        let mut lines = Vec::new();
        if is_withdrawn(ask) {
            lines.push(Line::styled(
                "WITHDRAWN: this ask no longer waits; no key decides it. Move on with ↑↓ or n.",
                Style::default().fg(Color::Red).add_modifier(Modifier::BOLD),
            ));
        }
        lines.push(Line::from(vec![
            label("WHAT"),
            Span::styled(
                visible(&what(ask)),
                Style::default()
                    .fg(Color::Yellow)
                    .add_modifier(Modifier::BOLD),
            ),
        ]));
        let asked = &ask["asked"];
        let tool = asked["tool"]
            .as_str()
            .map(|t| format!("tool {t}"))
            .or_else(|| asked["surface"].as_str().map(|s| format!("surface {s}")))
            .unwrap_or_else(|| "pre-fixed facts".into());
        lines.push(Line::from(vec![label("TOOL"), Span::raw(visible(&tool))]));
        let chain: Vec<String> = ask["principalChain"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|p| match p["agentName"].as_str() {
                Some(agent) => format!("{} (agent {agent})", text(&p["sessionId"])),
                None => text(&p["sessionId"]),
            })
            .collect();
        lines.push(Line::from(vec![
            label("WHO"),
            Span::raw(visible(&format!(
                "{} (agent {}); chain: {}",
                text(&ask["from"]),
                ask["agent"].as_str().unwrap_or("none"),
                chain.join(" <- ")
            ))),
        ]));
        for fact in ask["facts"].as_array().into_iter().flatten() {
            let values: Vec<String> = fact["matchValues"]
                .as_array()
                .into_iter()
                .flatten()
                .map(text)
                .collect();
            lines.push(Line::from(vec![
                label("FACT"),
                Span::raw(visible(&format!(
                    "{}: {}",
                    text(&fact["surface"]),
                    values.join("  |  ")
                ))),
            ]));
        }
        for hop in ask["hops"].as_array().into_iter().flatten() {
            let by = &hop["decidedBy"];
            let mut rule = text(&by["kind"]);
            for key in ["surface", "pattern", "origin", "reason"] {
                if let Some(value) = by.get(key).filter(|v| !v.is_null()) {
                    rule.push_str(&format!(" {key}={}", text(value)));
                }
            }
            lines.push(Line::from(vec![
                label("WHY"),
                Span::raw(visible(&format!(
                    "at {}: {} ({rule})",
                    text(&hop["session"]),
                    text(&hop["verdict"])
                ))),
            ]));
        }
        lines.push(Line::from(vec![
            label("WAITS AT"),
            Span::raw(visible(&format!(
                "{} ({})",
                text(&ask["at"]),
                text(&ask["inbox"])
            ))),
        ]));
        let now = now_ms();
        let deadline = ask["deadlineAt"].as_u64().unwrap_or(now);
        lines.push(Line::from(vec![
            label("TIMEOUT"),
            Span::raw(if deadline > now {
                format!("in {}", duration(deadline - now))
            } else {
                "now".into()
            }),
        ]));
        let derived = patterns_of(ask, "derivedGrants");
        for grant in ask["suggestedGrants"].as_array().into_iter().flatten() {
            let pattern = text(&grant["pattern"]);
            lines.push(Line::from(vec![
                label("SUGGEST"),
                Span::raw(visible(&format!("{}: {pattern}", text(&grant["surface"])))),
                breadth_note(&pattern, &derived),
            ]));
        }
        if let Some(error) = ask["lastError"].as_str() {
            lines.push(Line::from(vec![
                label("ERROR"),
                Span::styled(visible(error), Style::default().fg(Color::Red)),
            ]));
        }
        lines
    }

    fn draw_editor(&self, frame: &mut Frame, area: Rect) {
        let derived = self
            .current()
            .map(|a| patterns_of(a, "derivedGrants"))
            .unwrap_or_default();
        match &self.mode {
            Mode::Browse => {}
            Mode::Reason(reason) => {
                let block = Block::default()
                    .borders(Borders::ALL)
                    .title(" deny: reason ");
                frame.render_widget(
                    Paragraph::new(format!("{}_", visible(reason))).block(block),
                    area,
                );
            }
            Mode::Patterns { kind, lines, row } => {
                let title = match kind {
                    Grant::Session => " allow session: patterns to record (one per line) ",
                    Grant::Subagent => " allow subagent: patterns to record (one per line) ",
                    Grant::Always => {
                        " allow always: rules to add to the global config (one per line) "
                    }
                };
                let mut shown: Vec<Line> = lines
                    .iter()
                    .enumerate()
                    .map(|(i, line)| {
                        let cursor = if i == *row { "_" } else { "" };
                        let mut spans = vec![Span::raw(format!(
                            "{} {}{cursor}",
                            if i == *row { '>' } else { ' ' },
                            visible(line)
                        ))];
                        if !line.is_empty() {
                            spans.push(breadth_note(line, &derived));
                        }
                        Line::from(spans)
                    })
                    .collect();
                shown.push(Line::from(format!(
                    "  permfs suggests from the facts: {}",
                    visible(&derived.join("  "))
                )));
                let block = Block::default().borders(Borders::ALL).title(title);
                frame.render_widget(
                    Paragraph::new(shown)
                        .wrap(Wrap { trim: false })
                        .block(block),
                    area,
                );
            }
        }
    }
}
