//! `permfs prompt`: a terminal approval agent for the person deciding.
//!
//! It is only a client of the mount: the queue starts as the session's
//! `pending` listing (every ask waiting at the session or below that this
//! person may decide, oldest first, a bounded page), and then follows the
//! session's `events` stream (a blocking read, no polling) one line at a
//! time: an ask that arrived is read from its own inbox entry and added,
//! one that left is taken out. `pending` is read again only when the
//! stream says it lost events (`missed`), when an ask left the page while
//! more wait beyond it (the page refills), or when an event cannot be
//! placed. A decision is a write to the ask's inbox file like any other,
//! so the daemon's rules, checks and errors apply unchanged. Everything
//! the agent supplied is shown through [`super::untrusted::visible`], and
//! its message apart from the facts.

use super::untrusted::{visible, visible_lines};
use crate::session::tree::decision::{breadth, Breadth};
use crossterm::event::{self, Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use ratatui::layout::{Constraint, Direction, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Wrap};
use ratatui::Frame;
use serde_json::Value;
use std::collections::{HashSet, VecDeque};
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
    // What is shown and answered here must come from the daemon: a
    // directory that only looks like a session (a project's planted
    // `mount/sessions/main/pending`) is refused before anything is read.
    if let Err(why) = super::mount_client::verify_permfs(&dir, false) {
        eprintln!("permfs prompt: {why}");
        return 1;
    }
    // The stream is opened before the listing is read, so no change
    // falls between the two (one seen twice is recognised by its id).
    let stream = std::fs::File::open(dir.join("events")).map_err(|error| {
        format!(
            "no live updates ({}: {error})",
            dir.join("events").display()
        )
    });
    // Fail before taking over the terminal when the queue is unreadable.
    let listing = match load(&dir) {
        Ok(listing) => listing,
        Err(error) => {
            eprintln!("permfs prompt: {error}");
            return 1;
        }
    };
    let mut terminal = match ratatui::try_init() {
        Ok(terminal) => terminal,
        Err(error) => {
            eprintln!("permfs prompt: the terminal cannot be used: {error}");
            return 1;
        }
    };
    let mut app = App::new(dir, args.notify);
    app.take_listing(listing, true);
    let result = app.run(&mut terminal, stream);
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
    /// One line of the session's event stream (`Null`: a line that could
    /// not be read, so the queue is read anew).
    Event(Value),
    /// The event stream ended or could not be read (why).
    StreamEnded(String),
}

/// An ask waiting in one inbox: its id and the session it waits at (an
/// ask that moves on leaves one inbox and arrives at another).
type Key = (String, String);

/// What one event line means for the queue.
#[derive(Debug, PartialEq, Eq)]
enum Change {
    Arrived(Key),
    Departed(Key),
    /// A decision the daemon refused: the entry's `lastError`, when the
    /// event carries it.
    Refused(Key, Option<String>),
    /// What the daemon added to a config file for an `allow always`.
    Note(String),
    /// The stream lost events, or a line says something this prompt
    /// cannot place: the queue is read anew.
    Resync,
    /// Nothing the queue shows (a grant recorded, say).
    Nothing,
}

/// Reads one event line of the stream of session `own`.
fn change_of(event: &Value, own: &str) -> Change {
    let id = event["askId"].as_str().map(str::to_string);
    let kind = event["event"].as_str().unwrap_or_default();
    let (change, at) = match kind {
        "below" => (
            event["change"].as_str().unwrap_or_default(),
            event["at"].as_str().map(str::to_string),
        ),
        "missed" => return Change::Resync,
        "always" => {
            let added: Vec<String> = event["added"]
                .as_array()
                .into_iter()
                .flatten()
                .map(text)
                .collect();
            return Change::Note(format!(
                "added to {}: {}",
                text(&event["file"]),
                added.join("; ")
            ));
        }
        "granted" => return Change::Nothing,
        other => (other, Some(own.to_string())),
    };
    let (Some(id), Some(at)) = (id, at) else {
        // A change without an ask or an inbox (an older daemon's `below`).
        return Change::Resync;
    };
    match change {
        "arrived" => Change::Arrived((id, at)),
        "decided" | "left" => Change::Departed((id, at)),
        "refused" if kind == "below" => Change::Refused((id, at), None),
        "refused" => Change::Refused((id, at), event["error"].as_str().map(str::to_string)),
        _ => Change::Resync,
    }
}

/// The inbox entry of ask `id` waiting at `at`, relative to the directory
/// of session `own` (as `pending` names it), when `at` is `own` or below.
fn inbox_of(own: &str, at: &str, id: &str) -> Option<String> {
    if at == own {
        return Some(format!("inbox/{id}"));
    }
    let below = at.strip_prefix(own)?.strip_prefix('/')?;
    let path: String = below
        .split('/')
        .map(|name| format!("children/{name}/"))
        .collect();
    Some(format!("{path}inbox/{id}"))
}

/// Asks this prompt decided whose departure is still to come, at most.
const GONE_HERE: usize = 1024;

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
    /// The session this prompt decides for (the listing's `session`), and
    /// the listing's bound (`pageSize`): what the events are placed by.
    session: String,
    page_size: Option<u64>,
    /// Asks counted in `hidden` since the listing was read, by the event
    /// that brought them (their entries refused this person).
    hidden_known: HashSet<Key>,
    /// Asks counted in `more` since the listing was read, the same way.
    beyond_known: HashSet<Key>,
    /// Asks this prompt decided and took out itself: their departure,
    /// still to come on the stream, changes nothing.
    gone_here: VecDeque<Key>,
    /// An event could not be applied one by one: the listing is read anew
    /// once the events queued so far are taken.
    resync: bool,
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

/// The session's `pending` listing: the asks listed, how many more wait
/// beyond the listing's bound, how many wait where this person may not
/// decide, the session's id and the bound.
struct Listing {
    asks: Vec<Value>,
    more: u64,
    hidden: u64,
    session: String,
    page_size: Option<u64>,
}

fn load(dir: &Path) -> Result<Listing, String> {
    let path = dir.join("pending");
    let bytes = std::fs::read(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let view: Value = serde_json::from_slice(&bytes)
        .map_err(|e| format!("{} is not the pending listing: {e}", path.display()))?;
    Ok(Listing {
        asks: view["pending"].as_array().cloned().unwrap_or_default(),
        more: view["more"].as_u64().unwrap_or(0),
        hidden: view["notShown"].as_u64().unwrap_or(0),
        session: text(&view["session"]),
        page_size: view["pageSize"].as_u64(),
    })
}

/// The inbox entry of one ask read on its own (what `cat` shows), with
/// the `inbox` name the listing would give it.
fn load_entry(dir: &Path, inbox: &str) -> std::io::Result<Value> {
    let bytes = std::fs::read(dir.join(inbox))?;
    let mut entry: Value = serde_json::from_slice(&bytes)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
    if let Value::Object(object) = &mut entry {
        object.remove("answer");
        object.insert("inbox".into(), Value::String(inbox.to_string()));
    }
    Ok(entry)
}

fn key_of(ask: &Value) -> Key {
    (text(&ask["askId"]), text(&ask["at"]))
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
    crate::session::tree::ask::now_ms()
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

/// Reads the session's event stream and hands the loop each line.
/// Lines are joined across reads (a long `arrived` line may come in
/// pieces). A read that fails (a new server after a restart or an upgrade
/// does not know the old stream's cursor: `ESTALE`) opens the stream
/// again and has the queue read anew, since events may have gone by in
/// between; only a stream that cannot be opened again ends live updates.
fn watch_events(dir: PathBuf, mut stream: std::fs::File, wake: mpsc::Sender<Wake>) {
    let mut buffer = vec![0u8; 256 * 1024];
    let mut partial: Vec<u8> = Vec::new();
    // Reopened streams that failed again before giving a byte: a stream
    // that keeps failing is given up, not spun on.
    let mut failures = 0;
    loop {
        match stream.read(&mut buffer) {
            Ok(0) => {
                let _ = wake.send(Wake::StreamEnded("the session ended".into()));
                return;
            }
            Ok(n) => {
                failures = 0;
                partial.extend_from_slice(&buffer[..n]);
                let Some(end) = partial.iter().rposition(|b| *b == b'\n') else {
                    continue;
                };
                let rest = partial.split_off(end + 1);
                let lines = std::mem::replace(&mut partial, rest);
                for line in lines.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
                    let event = serde_json::from_slice::<Value>(line).unwrap_or(Value::Null);
                    if wake.send(Wake::Event(event)).is_err() {
                        return;
                    }
                }
            }
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(error) => match (failures < 5).then(|| reopen_events(&dir)).flatten() {
                Some(again) => {
                    failures += 1;
                    stream = again;
                    partial.clear();
                    let resync =
                        serde_json::json!({"event": "missed", "reason": error.to_string()});
                    if wake.send(Wake::Event(resync)).is_err() {
                        return;
                    }
                }
                None => {
                    let _ = wake.send(Wake::StreamEnded(format!("no live updates: {error}")));
                    return;
                }
            },
        }
    }
}

/// The session's event stream opened again, retried for a few seconds (a
/// server starting after a restart); `None` once the session is gone or
/// the stream stays unreadable.
fn reopen_events(dir: &Path) -> Option<std::fs::File> {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        match std::fs::File::open(dir.join("events")) {
            Ok(stream) => return Some(stream),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return None,
            Err(_) if std::time::Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(_) => return None,
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
            session: String::new(),
            page_size: None,
            hidden_known: HashSet::new(),
            beyond_known: HashSet::new(),
            gone_here: VecDeque::new(),
            resync: false,
            selected: 0,
            scroll: 0,
            mode: Mode::Browse,
            status: Line::from("q quits without deciding anything"),
            live: None,
            shown: None,
            moved: false,
        }
    }

    /// Reads the whole queue anew (`pending`). The selected ask keeps the
    /// cursor; when it left without this prompt deciding it (withdrawn,
    /// timed out, decided elsewhere) it stays shown in its place, marked
    /// withdrawn, until the person moves on: the cursor never jumps to
    /// another ask by itself.
    fn reload(&mut self) {
        self.reload_keeping(true);
    }

    fn reload_keeping(&mut self, keep_gone: bool) {
        match load(&self.dir) {
            Ok(listing) => self.take_listing(listing, keep_gone),
            Err(error) => self.status = Line::styled(error, Style::default().fg(Color::Red)),
        }
    }

    /// Takes a listing read from `pending` as the queue.
    fn take_listing(&mut self, listing: Listing, keep_gone: bool) {
        let current = self.current().cloned();
        self.asks = listing.asks;
        self.more = listing.more;
        self.hidden = listing.hidden;
        self.session = listing.session;
        self.page_size = listing.page_size;
        self.hidden_known.clear();
        self.beyond_known.clear();
        self.resync = false;
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

    fn run(
        mut self,
        terminal: &mut ratatui::DefaultTerminal,
        stream: Result<std::fs::File, String>,
    ) -> Result<(), String> {
        let (wake, woken) = mpsc::channel();
        match stream {
            Ok(stream) => {
                let events = wake.clone();
                let dir = self.dir.clone();
                std::thread::spawn(move || watch_events(dir, stream, events));
            }
            Err(why) => self.live = Some(why),
        }
        std::thread::spawn(move || read_keys(wake));
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
                Wake::Event(event) => {
                    // Each event already queued is applied in turn before
                    // the next frame (a key queued after them is handled
                    // next, in order); the listing is read anew at most
                    // once for all of them.
                    let before: HashSet<Key> = self.asks.iter().map(key_of).collect();
                    let mut arrived = self.apply(&event);
                    while let Ok(next) = woken.try_recv() {
                        match next {
                            Wake::Event(event) => arrived |= self.apply(&event),
                            other => {
                                backlog.push_back(other);
                                break;
                            }
                        }
                    }
                    if self.resync {
                        self.reload();
                    }
                    let new: Vec<&Value> = self
                        .asks
                        .iter()
                        .filter(|a| !is_withdrawn(a) && !before.contains(&key_of(a)))
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
                Wake::Key(key) => {
                    if !self.key(key) {
                        return Ok(());
                    }
                }
            }
        }
    }

    /// Applies one event line to the queue; `true` when an ask arrived.
    /// What cannot be applied on its own sets `resync`.
    fn apply(&mut self, event: &Value) -> bool {
        if self.resync {
            // The listing is read anew after this burst anyway; only the
            // notes still count.
            if let Change::Note(note) = change_of(event, &self.session) {
                self.status = Line::styled(visible(&note), Style::default().fg(Color::Green));
            }
            return false;
        }
        match change_of(event, &self.session) {
            Change::Arrived(key) => {
                self.arrived(key);
                true
            }
            Change::Departed(key) => {
                self.departed(key);
                false
            }
            Change::Refused(key, error) => {
                self.refused(key, error);
                false
            }
            Change::Note(note) => {
                self.status = Line::styled(visible(&note), Style::default().fg(Color::Green));
                false
            }
            Change::Resync => {
                self.resync = true;
                false
            }
            Change::Nothing => false,
        }
    }

    fn position(&self, key: &Key) -> Option<usize> {
        self.asks.iter().position(|a| key_of(a) == *key)
    }

    /// Asks the listing would show now (the page), withdrawn ones aside.
    fn listed(&self) -> u64 {
        self.asks.iter().filter(|a| !is_withdrawn(a)).count() as u64
    }

    /// An ask arrived at `key.1`: its own entry is read (one small read,
    /// not the page) and added at the end, or counted beyond the page, or
    /// among those this person may not decide.
    fn arrived(&mut self, key: Key) {
        if let Some(i) = self.position(&key) {
            if !is_withdrawn(&self.asks[i]) {
                return; // listed already (the listing saw it)
            }
        }
        let Some(inbox) = inbox_of(&self.session, &key.1, &key.0) else {
            self.resync = true;
            return;
        };
        match load_entry(&self.dir, &inbox) {
            Ok(entry) => {
                let full = self.more > 0 || self.page_size.is_some_and(|n| self.listed() >= n);
                if full {
                    // Newer than every listed ask: beyond the page.
                    self.more += 1;
                    self.beyond_known.insert(key);
                } else if let Some(i) = self.position(&key) {
                    self.asks[i] = entry;
                } else {
                    self.asks.push(entry);
                }
            }
            Err(error) => match error.raw_os_error() {
                Some(libc::EACCES) | Some(libc::EPERM) => {
                    self.hidden += 1;
                    self.hidden_known.insert(key);
                }
                // It left already; its departure is next on the stream.
                Some(libc::ENOENT) => self.gone_here.push_back(key),
                _ => self.resync = true,
            },
        }
        self.bound_gone_here();
    }

    /// An ask left `key.1` (decided, withdrawn, timed out). The selected
    /// one stays shown, marked withdrawn; the page refills from `pending`
    /// only when more wait beyond it.
    fn departed(&mut self, key: Key) {
        if let Some(i) = self.gone_here.iter().position(|k| *k == key) {
            self.gone_here.remove(i);
            return;
        }
        if let Some(i) = self.position(&key) {
            if i == self.selected {
                if let Value::Object(object) = &mut self.asks[i] {
                    object.insert("withdrawn".into(), Value::Bool(true));
                }
            } else {
                self.asks.remove(i);
                if i < self.selected {
                    self.selected -= 1;
                }
            }
            if self.more > 0 {
                self.resync = true;
            }
            return;
        }
        if self.hidden_known.remove(&key) {
            self.hidden = self.hidden.saturating_sub(1);
            return;
        }
        if self.beyond_known.remove(&key) {
            self.more = self.more.saturating_sub(1);
            return;
        }
        // Not listed: beyond the page, or where this person may not
        // decide, counted when the listing was read.
        let counted = (self.hidden_known.len() + self.beyond_known.len()) as u64;
        if self.more + self.hidden > counted {
            self.resync = true;
        }
    }

    /// A decision at `key.1` was refused: the entry shows why.
    fn refused(&mut self, key: Key, error: Option<String>) {
        let Some(i) = self.position(&key) else {
            return;
        };
        let error = error.or_else(|| {
            let inbox = text(&self.asks[i]["inbox"]);
            load_entry(&self.dir, &inbox)
                .ok()
                .and_then(|e| e["lastError"].as_str().map(str::to_string))
        });
        if let (Value::Object(object), Some(error)) = (&mut self.asks[i], error) {
            object.insert("lastError".into(), Value::String(error));
        }
    }

    fn bound_gone_here(&mut self) {
        while self.gone_here.len() > GONE_HERE {
            self.gone_here.pop_front();
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
                // The daemon keeps its reason on the entry (`lastError`):
                // the entry is read again; one that is gone stays shown,
                // marked withdrawn.
                let why = match load_entry(&self.dir, &text(&ask["inbox"])) {
                    Ok(entry) => {
                        let why = text(&entry["lastError"]);
                        if let Some(i) = self.position(&key_of(&ask)) {
                            self.asks[i] = entry;
                        }
                        why
                    }
                    Err(_) => {
                        if let Some(Value::Object(object)) = self.asks.get_mut(self.selected) {
                            object.insert("withdrawn".into(), Value::Bool(true));
                        }
                        String::new()
                    }
                };
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
        // The ask this prompt decided leaves the queue (its departure on
        // the stream then changes nothing); the next one comes under the
        // cursor by itself (so `SETTLE` applies to it). With asks waiting
        // beyond the page, the page refills from `pending`.
        if decided {
            if let Some(i) = self.position(&key_of(&ask)) {
                self.asks.remove(i);
            }
            self.gone_here.push_back(key_of(&ask));
            self.bound_gone_here();
            self.scroll = 0;
            self.selected = self.selected.min(self.asks.len().saturating_sub(1));
            if self.more > 0 {
                self.reload_keeping(false);
            }
        }
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
        if let Some(reason) = ask["guard"]["reason"].as_str() {
            lines.push(Line::from(vec![label("GUARD"), Span::raw(visible(reason))]));
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn event_lines_are_read_as_changes_of_one_inbox() {
        let own = "main";
        let key = |id: &str, at: &str| (id.to_string(), at.to_string());
        assert_eq!(
            change_of(&json!({"event": "arrived", "askId": "1.2-r"}), own),
            Change::Arrived(key("1.2-r", "main"))
        );
        assert_eq!(
            change_of(&json!({"event": "left", "askId": "1.2-r"}), own),
            Change::Departed(key("1.2-r", "main"))
        );
        assert_eq!(
            change_of(
                &json!({"event": "below", "change": "decided", "at": "main/a", "askId": "1.3-r"}),
                own
            ),
            Change::Departed(key("1.3-r", "main/a"))
        );
        assert_eq!(
            change_of(
                &json!({"event": "refused", "askId": "1.2-r", "error": "no"}),
                own
            ),
            Change::Refused(key("1.2-r", "main"), Some("no".into()))
        );
        // What cannot be placed is read anew, never guessed.
        assert_eq!(
            change_of(&json!({"event": "missed", "count": 3}), own),
            Change::Resync
        );
        assert_eq!(
            change_of(
                &json!({"event": "below", "change": "arrived", "at": "main/a"}),
                own
            ),
            Change::Resync
        );
        assert_eq!(change_of(&Value::Null, own), Change::Resync);
        assert_eq!(
            change_of(&json!({"event": "granted", "askId": "x"}), own),
            Change::Nothing
        );
        assert_eq!(inbox_of("main", "main", "7"), Some("inbox/7".into()));
        assert_eq!(
            inbox_of("main", "main/a/b", "7"),
            Some("children/a/children/b/inbox/7".into())
        );
        assert_eq!(inbox_of("main", "mainx/a", "7"), None);
        assert_eq!(inbox_of("main/a", "main", "7"), None);
    }

    /// A session directory stand-in: inbox entries are plain files here.
    fn entry(dir: &Path, at: &str, id: &str) {
        let inbox = inbox_of("main", at, id).expect("below main");
        let path = dir.join(&inbox);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("dirs");
        let body = json!({"askId": id, "at": at, "from": at, "facts": []});
        std::fs::write(path, body.to_string()).expect("entry");
    }

    fn app(dir: &Path, asks: &[(&str, &str)], more: u64, page: u64) -> App {
        let mut app = App::new(dir.to_path_buf(), false);
        let asks = asks
            .iter()
            .map(|(id, at)| {
                entry(dir, at, id);
                load_entry(dir, &inbox_of("main", at, id).expect("below")).expect("entry")
            })
            .collect();
        app.take_listing(
            Listing {
                asks,
                more,
                hidden: 0,
                session: "main".into(),
                page_size: Some(page),
            },
            true,
        );
        app
    }

    fn ids(app: &App) -> Vec<String> {
        app.asks.iter().map(|a| text(&a["askId"])).collect()
    }

    #[test]
    fn events_change_the_queue_one_ask_at_a_time() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut app = app(dir.path(), &[("1", "main")], 0, 3);
        // Arrivals here and below are read from their own entries.
        entry(dir.path(), "main", "2");
        entry(dir.path(), "main/a", "3");
        assert!(app.apply(&json!({"event": "arrived", "askId": "2"})));
        assert!(app
            .apply(&json!({"event": "below", "change": "arrived", "at": "main/a", "askId": "3"})));
        assert_eq!(ids(&app), ["1", "2", "3"]);
        assert_eq!(app.asks[2]["inbox"], "children/a/inbox/3");
        assert!(!app.resync);
        // One seen twice (the listing saw it too) is listed once.
        app.apply(&json!({"event": "arrived", "askId": "2"}));
        assert_eq!(ids(&app).len(), 3);
        // The page is full: the next one is counted beyond it.
        entry(dir.path(), "main", "4");
        app.apply(&json!({"event": "arrived", "askId": "4"}));
        assert_eq!((ids(&app).len(), app.more), (3, 1));
        // It leaves: only the count changes.
        app.apply(&json!({"event": "left", "askId": "4"}));
        assert_eq!((app.more, app.resync), (0, false));
        // An unselected ask leaves: taken out. The selected one leaves:
        // it stays, marked withdrawn.
        app.apply(&json!({"event": "below", "change": "left", "at": "main/a", "askId": "3"}));
        assert_eq!(ids(&app), ["1", "2"]);
        app.apply(&json!({"event": "decided", "askId": "1"}));
        assert_eq!(ids(&app), ["1", "2"]);
        assert!(is_withdrawn(&app.asks[0]) && app.selected == 0);
        // One that left before its entry was read is not listed, and its
        // departure changes nothing.
        app.apply(&json!({"event": "arrived", "askId": "gone"}));
        app.apply(&json!({"event": "left", "askId": "gone"}));
        assert_eq!(ids(&app), ["1", "2"]);
        assert!(!app.resync);
        // Lost events: read anew.
        app.apply(&json!({"event": "missed", "count": 2}));
        assert!(app.resync);
    }

    #[test]
    fn a_page_that_loses_an_ask_is_read_anew_when_more_wait() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut page = app(dir.path(), &[("1", "main"), ("2", "main")], 5, 2);
        page.apply(&json!({"event": "left", "askId": "2"}));
        assert!(page.resync, "the page refills from `pending`");
        let mut page = app(dir.path(), &[("1", "main")], 3, 1);
        // One not listed leaves while asks counted at the read wait
        // beyond the page: which one is unknown, so read anew.
        page.apply(&json!({"event": "left", "askId": "99"}));
        assert!(page.resync);
    }
}
