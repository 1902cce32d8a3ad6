//! Per-session event streams: one JSON line per change in the inbox.
//!
//! Each session keeps a bounded backlog. Every reader has its own cursor,
//! so several watchers each see every event; a reader that falls more than
//! the backlog behind gets a `missed` line with the count, never silence.

use serde_json::{json, Value};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

/// Events kept per session for readers that fall behind.
pub const EVENT_BACKLOG: usize = 4096;
/// Bytes of events kept per session: an `arrived` line carries the ask's
/// facts (up to a few hundred KB for a large ask), so 4096 of them could
/// hold a gigabyte; past this the oldest go, as past the count.
pub const EVENT_BACKLOG_BYTES: usize = 4 << 20;

/// Hands bytes to a parked reader; false when the reader went away.
pub type EventDeliver = Box<dyn FnOnce(Vec<u8>) -> bool + Send>;

/// A reader's position: the sequence number of the next event it reads.
pub type Cursor = Arc<Mutex<u64>>;

#[derive(Default)]
pub struct EventLog {
    first_seq: u64,
    lines: VecDeque<String>,
    /// The bytes `lines` holds.
    bytes: usize,
    readers: Vec<(Cursor, usize, EventDeliver)>,
}

impl std::fmt::Debug for EventLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventLog")
            .field("first_seq", &self.first_seq)
            .field("lines", &self.lines.len())
            .field("readers", &self.readers.len())
            .finish()
    }
}

impl EventLog {
    pub fn next_seq(&self) -> u64 {
        self.first_seq + self.lines.len() as u64
    }

    /// Appends an event and wakes every parked reader.
    pub fn publish(&mut self, mut event: Value) {
        if let Value::Object(object) = &mut event {
            object.insert("seq".into(), json!(self.next_seq()));
            object.insert("time".into(), json!(crate::session::tree::ask::now_ms()));
        }
        let line = event.to_string();
        self.bytes += line.len();
        self.lines.push_back(line);
        // The newest line always stays (a reader is never told only of a
        // loss).
        while self.lines.len() > EVENT_BACKLOG
            || (self.bytes > EVENT_BACKLOG_BYTES && self.lines.len() > 1)
        {
            if let Some(old) = self.lines.pop_front() {
                self.bytes -= old.len();
            }
            self.first_seq += 1;
        }
        for (cursor, max, deliver) in std::mem::take(&mut self.readers) {
            let before = cursor.lock().map(|c| *c).unwrap_or(0);
            let bytes = self.take(&cursor, max);
            if !deliver(bytes) {
                if let Ok(mut position) = cursor.lock() {
                    *position = before;
                }
            }
        }
    }

    /// The lines from `cursor` that fit in `max` bytes (at least one),
    /// preceded by a `missed` line if the reader fell behind. A line longer
    /// than `max` by itself (an `arrived` line carries the ask's facts) is
    /// given in its short form ([`short_form`]): a reply longer than the
    /// read would fail the read (`EIO`) and lose the event.
    pub fn take(&self, cursor: &Cursor, max: usize) -> Vec<u8> {
        let Ok(mut position) = cursor.lock() else {
            return Vec::new();
        };
        let mut out = Vec::new();
        if *position < self.first_seq {
            let missed = self.first_seq - *position;
            out.extend_from_slice(
                json!({"event": "missed", "count": missed})
                    .to_string()
                    .as_bytes(),
            );
            out.push(b'\n');
            *position = self.first_seq;
        }
        while *position < self.next_seq() {
            let Some(line) = self.lines.get((*position - self.first_seq) as usize) else {
                break;
            };
            if out.len() + line.len() + 1 > max {
                if !out.is_empty() {
                    break;
                }
                out.extend_from_slice(short_form(line).as_bytes());
                out.push(b'\n');
                *position += 1;
                continue;
            }
            out.extend_from_slice(line.as_bytes());
            out.push(b'\n');
            *position += 1;
        }
        out
    }

    pub fn has_news(&self, cursor: &Cursor) -> bool {
        cursor.lock().map(|c| *c < self.next_seq()).unwrap_or(false)
    }

    pub fn park(&mut self, cursor: Cursor, max: usize, deliver: EventDeliver) {
        self.readers.push((cursor, max, deliver));
    }

    /// The session ended: parked readers get end-of-file.
    pub fn close(&mut self) {
        for (_, _, deliver) in std::mem::take(&mut self.readers) {
            deliver(Vec::new());
        }
    }
}

/// An event without its details (facts, message, patterns): which event,
/// which ask, where, and `"detailsOmitted": true`, for a reader whose read
/// is too short for the whole line. It reads the details from the entry
/// (`inbox/<askId>`) or `pending`.
fn short_form(line: &str) -> String {
    const KEPT: [&str; 9] = [
        "event", "change", "askId", "from", "at", "outcome", "grant", "seq", "time",
    ];
    let mut short = serde_json::Map::new();
    if let Ok(Value::Object(event)) = serde_json::from_str::<Value>(line) {
        for key in KEPT {
            if let Some(value) = event.get(key) {
                short.insert(key.to_string(), value.clone());
            }
        }
    }
    short.insert("detailsOmitted".into(), json!(true));
    Value::Object(short).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reader_sees_every_event_and_laggards_are_told() {
        let mut log = EventLog::default();
        let early: Cursor = Arc::new(Mutex::new(log.next_seq()));
        log.publish(json!({"event": "arrived"}));
        let late: Cursor = Arc::new(Mutex::new(log.next_seq()));
        log.publish(json!({"event": "decided"}));
        let early_lines = String::from_utf8(log.take(&early, 1 << 20)).expect("utf8");
        assert_eq!(early_lines.lines().count(), 2);
        let late_lines = String::from_utf8(log.take(&late, 1 << 20)).expect("utf8");
        assert_eq!(late_lines.lines().count(), 1);
        assert!(late_lines.contains("decided"));

        let behind: Cursor = Arc::new(Mutex::new(log.next_seq()));
        for _ in 0..EVENT_BACKLOG + 5 {
            log.publish(json!({"event": "arrived"}));
        }
        let text = String::from_utf8(log.take(&behind, 1 << 30)).expect("utf8");
        let first = text.lines().next().expect("a line");
        assert_eq!(first, r#"{"event":"missed","count":5}"#);
        assert_eq!(text.lines().count(), EVENT_BACKLOG + 1);
    }

    #[test]
    fn a_line_longer_than_the_read_comes_short_never_lost() {
        let mut log = EventLog::default();
        let cursor: Cursor = Arc::new(Mutex::new(0));
        let facts = "x".repeat(10_000);
        log.publish(json!({"event": "arrived", "askId": "1.1-r", "from": "main", "facts": facts}));
        log.publish(json!({"event": "left", "askId": "1.1-r"}));
        let text = String::from_utf8(log.take(&cursor, 4096)).expect("utf8");
        assert!(text.len() <= 4096, "{}", text.len());
        let first: Value =
            serde_json::from_str(text.lines().next().expect("a line")).expect("JSON");
        assert_eq!(
            (&first["event"], &first["askId"], &first["detailsOmitted"]),
            (&json!("arrived"), &json!("1.1-r"), &json!(true))
        );
        assert!(first.get("facts").is_none());
        // The next line follows whole, in this read or the next.
        let rest = String::from_utf8(log.take(&cursor, 4096)).expect("utf8");
        assert!(text.contains("\"left\"") || rest.contains("\"left\""));
    }

    #[test]
    fn a_parked_reader_is_woken_and_an_absent_one_keeps_its_place() {
        let mut log = EventLog::default();
        let cursor: Cursor = Arc::new(Mutex::new(0));
        let got = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&got);
        log.park(
            Arc::clone(&cursor),
            4096,
            Box::new(move |bytes| {
                sink.lock().expect("lock").extend(bytes);
                true
            }),
        );
        log.publish(json!({"event": "arrived"}));
        assert!(String::from_utf8_lossy(&got.lock().expect("lock")).contains("arrived"));

        let gone: Cursor = Arc::new(Mutex::new(log.next_seq()));
        log.park(Arc::clone(&gone), 4096, Box::new(|_| false));
        log.publish(json!({"event": "left"}));
        assert!(
            log.has_news(&gone),
            "an interrupted reader reads the event next time"
        );
    }
}
