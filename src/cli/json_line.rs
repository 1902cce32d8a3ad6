//! Compact JSON text, byte for byte what `serde_json::to_writer` writes,
//! for the answer lines of `permfs resolve`.
//!
//! Why not `serde_json` itself: an answer line is about 1 KB of paths and
//! commands, and `serde_json` looks every byte of a string up in its
//! escape table one at a time (a tenth of `resolve`'s time). Here a string
//! is checked 16 bytes at a time and copied whole when nothing in it needs
//! escaping, which is almost always. Escapes are `serde_json`'s: `\"`,
//! `\\`, `\b`, `\f`, `\n`, `\r`, `\t`, and `\u00XX` for the other control
//! characters; everything else is copied as is. Numbers are handed to
//! `serde_json`, so they are spelled as it spells them.
//!
//! Only the shapes the answers use are written here (structs, sequences,
//! strings, options, unit variants, integers, floats, maps keyed by
//! strings); anything else reports [`Error::Unsupported`] and the caller
//! writes that line with `serde_json` instead, so the output never depends
//! on which writer ran.

use serde::ser::{self, Serialize};
use std::fmt;

/// Why a value was not written.
#[derive(Debug)]
pub enum Error {
    /// A shape this writer leaves to `serde_json`.
    Unsupported,
    /// What a value's own `Serialize` reported.
    Custom(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Unsupported => f.write_str("a shape left to serde_json"),
            Self::Custom(message) => f.write_str(message),
        }
    }
}

impl std::error::Error for Error {}

impl ser::Error for Error {
    fn custom<T: fmt::Display>(message: T) -> Self {
        Self::Custom(message.to_string())
    }
}

/// Appends `value` to `out` as compact JSON; on an error `out` may hold
/// part of it (the caller truncates).
pub fn append<T: Serialize + ?Sized>(out: &mut Vec<u8>, value: &T) -> Result<(), Error> {
    value.serialize(&mut Writer { out })
}

/// `value` as `serde_json::to_writer` writes it: through [`append`], or
/// `serde_json` for a shape [`append`] leaves to it.
pub fn write_line<T: Serialize + ?Sized>(
    out: &mut Vec<u8>,
    value: &T,
) -> Result<(), serde_json::Error> {
    let start = out.len();
    if append(out, value).is_ok() {
        return Ok(());
    }
    out.truncate(start);
    serde_json::to_writer(&mut *out, value)
}

struct Writer<'a> {
    out: &'a mut Vec<u8>,
}

/// The escape of a byte that needs one (`serde_json`'s table), else 0.
const fn escape_of(byte: u8) -> u8 {
    match byte {
        0x08 => b'b',
        0x09 => b't',
        0x0A => b'n',
        0x0C => b'f',
        0x0D => b'r',
        b'"' => b'"',
        b'\\' => b'\\',
        0x00..=0x1F => b'u',
        _ => 0,
    }
}

fn needs_escape(byte: u8) -> bool {
    byte < 0x20 || byte == b'"' || byte == b'\\'
}

/// Writes the escape of a byte that [`needs_escape`].
fn push_escape(out: &mut Vec<u8>, byte: u8) {
    match escape_of(byte) {
        b'u' => {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            out.extend_from_slice(b"\\u00");
            out.push(HEX[usize::from(byte >> 4)]);
            out.push(HEX[usize::from(byte & 0xF)]);
        }
        short => {
            out.push(b'\\');
            out.push(short);
        }
    }
}

/// A JSON string: quoted, escaped as `serde_json` escapes. Runs without
/// an escape are copied whole.
pub fn push_str(out: &mut Vec<u8>, text: &str) {
    let bytes = text.as_bytes();
    out.reserve(bytes.len() + 2);
    out.push(b'"');
    // `bytes[run..]` is not written yet; it holds no escape before `at`.
    let mut run = 0;
    let mut at = 0;
    let mut escape_at = |at: usize, out: &mut Vec<u8>| {
        out.extend_from_slice(&bytes[run..at]);
        push_escape(out, bytes[at]);
        run = at + 1;
    };
    while let Some(chunk) = bytes
        .get(at..at + CHUNK)
        .and_then(|c| <&[u8; CHUNK]>::try_from(c).ok())
    {
        if any_escape(chunk) {
            for (offset, &byte) in chunk.iter().enumerate() {
                if needs_escape(byte) {
                    escape_at(at + offset, out);
                }
            }
        }
        at += CHUNK;
    }
    // The rest (most keys and short values are all rest), padded with a
    // byte that needs no escape so it is checked the same way.
    let tail = &bytes[at..];
    let mut padded = [b' '; CHUNK];
    padded[..tail.len()].copy_from_slice(tail);
    if any_escape(&padded) {
        for (offset, &byte) in tail.iter().enumerate() {
            if needs_escape(byte) {
                escape_at(at + offset, out);
            }
        }
    }
    out.extend_from_slice(&bytes[run..]);
    out.push(b'"');
}

/// Bytes checked at a time.
const CHUNK: usize = 16;

/// Whether any byte of a chunk needs an escape; a fixed-size check with no
/// early exit, so it compiles to a few vector instructions.
fn any_escape(chunk: &[u8; CHUNK]) -> bool {
    chunk.iter().fold(false, |any, &b| any | needs_escape(b))
}

impl Writer<'_> {
    fn number<T: Serialize>(&mut self, value: T) -> Result<(), Error> {
        serde_json::to_writer(&mut *self.out, &value).map_err(|e| Error::Custom(e.to_string()))
    }
}

/// An open array or object: whether a comma goes before the next item.
pub struct Compound<'w, 'a> {
    writer: &'w mut Writer<'a>,
    first: bool,
    /// Closing text: `]`, `}`, or `]}` / `}}` for a variant's contents.
    close: &'static [u8],
}

impl Compound<'_, '_> {
    fn comma(&mut self) {
        if !self.first {
            self.writer.out.push(b',');
        }
        self.first = false;
    }
}

impl<'w, 'a> Writer<'a> {
    fn open(&'w mut self, open: &[u8], close: &'static [u8]) -> Compound<'w, 'a> {
        self.out.extend_from_slice(open);
        Compound {
            writer: self,
            first: true,
            close,
        }
    }

    fn open_variant(
        &'w mut self,
        variant: &str,
        open: u8,
        close: &'static [u8],
    ) -> Compound<'w, 'a> {
        self.out.push(b'{');
        push_str(self.out, variant);
        self.out.push(b':');
        self.out.push(open);
        Compound {
            writer: self,
            first: true,
            close,
        }
    }
}

impl<'w, 'a> ser::Serializer for &'w mut Writer<'a> {
    type Ok = ();
    type Error = Error;
    type SerializeSeq = Compound<'w, 'a>;
    type SerializeTuple = Compound<'w, 'a>;
    type SerializeTupleStruct = Compound<'w, 'a>;
    type SerializeTupleVariant = Compound<'w, 'a>;
    type SerializeMap = Compound<'w, 'a>;
    type SerializeStruct = Compound<'w, 'a>;
    type SerializeStructVariant = Compound<'w, 'a>;

    fn serialize_bool(self, v: bool) -> Result<(), Error> {
        self.out
            .extend_from_slice(if v { b"true" } else { b"false" });
        Ok(())
    }
    fn serialize_i8(self, v: i8) -> Result<(), Error> {
        self.number(v)
    }
    fn serialize_i16(self, v: i16) -> Result<(), Error> {
        self.number(v)
    }
    fn serialize_i32(self, v: i32) -> Result<(), Error> {
        self.number(v)
    }
    fn serialize_i64(self, v: i64) -> Result<(), Error> {
        self.number(v)
    }
    fn serialize_i128(self, v: i128) -> Result<(), Error> {
        self.number(v)
    }
    fn serialize_u8(self, v: u8) -> Result<(), Error> {
        self.number(v)
    }
    fn serialize_u16(self, v: u16) -> Result<(), Error> {
        self.number(v)
    }
    fn serialize_u32(self, v: u32) -> Result<(), Error> {
        self.number(v)
    }
    fn serialize_u64(self, v: u64) -> Result<(), Error> {
        self.number(v)
    }
    fn serialize_u128(self, v: u128) -> Result<(), Error> {
        self.number(v)
    }
    fn serialize_f32(self, v: f32) -> Result<(), Error> {
        self.number(v)
    }
    fn serialize_f64(self, v: f64) -> Result<(), Error> {
        self.number(v)
    }
    fn serialize_char(self, v: char) -> Result<(), Error> {
        push_str(self.out, v.encode_utf8(&mut [0; 4]));
        Ok(())
    }
    fn serialize_str(self, v: &str) -> Result<(), Error> {
        push_str(self.out, v);
        Ok(())
    }
    fn serialize_bytes(self, _: &[u8]) -> Result<(), Error> {
        Err(Error::Unsupported)
    }
    fn serialize_none(self) -> Result<(), Error> {
        self.out.extend_from_slice(b"null");
        Ok(())
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), Error> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<(), Error> {
        self.serialize_none()
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result<(), Error> {
        self.serialize_none()
    }
    fn serialize_unit_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
    ) -> Result<(), Error> {
        push_str(self.out, variant);
        Ok(())
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Result<(), Error> {
        Err(Error::Unsupported)
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Compound<'w, 'a>, Error> {
        Ok(self.open(b"[", b"]"))
    }
    fn serialize_tuple(self, len: usize) -> Result<Compound<'w, 'a>, Error> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_struct(
        self,
        _: &'static str,
        len: usize,
    ) -> Result<Compound<'w, 'a>, Error> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        _: usize,
    ) -> Result<Compound<'w, 'a>, Error> {
        Ok(self.open_variant(variant, b'[', b"]}"))
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Compound<'w, 'a>, Error> {
        Ok(self.open(b"{", b"}"))
    }
    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Compound<'w, 'a>, Error> {
        Ok(self.open(b"{", b"}"))
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        _: usize,
    ) -> Result<Compound<'w, 'a>, Error> {
        Ok(self.open_variant(variant, b'{', b"}}"))
    }
}

impl ser::SerializeSeq for Compound<'_, '_> {
    type Ok = ();
    type Error = Error;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        self.comma();
        value.serialize(&mut *self.writer)
    }
    fn end(self) -> Result<(), Error> {
        self.writer.out.extend_from_slice(self.close);
        Ok(())
    }
}

impl ser::SerializeTuple for Compound<'_, '_> {
    type Ok = ();
    type Error = Error;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        ser::SerializeSeq::serialize_element(self, value)
    }
    fn end(self) -> Result<(), Error> {
        ser::SerializeSeq::end(self)
    }
}

impl ser::SerializeTupleStruct for Compound<'_, '_> {
    type Ok = ();
    type Error = Error;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        ser::SerializeSeq::serialize_element(self, value)
    }
    fn end(self) -> Result<(), Error> {
        ser::SerializeSeq::end(self)
    }
}

impl ser::SerializeTupleVariant for Compound<'_, '_> {
    type Ok = ();
    type Error = Error;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        ser::SerializeSeq::serialize_element(self, value)
    }
    fn end(self) -> Result<(), Error> {
        ser::SerializeSeq::end(self)
    }
}

impl ser::SerializeMap for Compound<'_, '_> {
    type Ok = ();
    type Error = Error;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), Error> {
        self.comma();
        key.serialize(KeyWriter {
            out: &mut *self.writer.out,
        })?;
        self.writer.out.push(b':');
        Ok(())
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        value.serialize(&mut *self.writer)
    }
    fn end(self) -> Result<(), Error> {
        self.writer.out.extend_from_slice(self.close);
        Ok(())
    }
}

impl ser::SerializeStruct for Compound<'_, '_> {
    type Ok = ();
    type Error = Error;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        self.comma();
        push_str(self.writer.out, key);
        self.writer.out.push(b':');
        value.serialize(&mut *self.writer)
    }
    fn end(self) -> Result<(), Error> {
        self.writer.out.extend_from_slice(self.close);
        Ok(())
    }
}

impl ser::SerializeStructVariant for Compound<'_, '_> {
    type Ok = ();
    type Error = Error;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        ser::SerializeStruct::serialize_field(self, key, value)
    }
    fn end(self) -> Result<(), Error> {
        ser::SerializeStruct::end(self)
    }
}

/// A map key: only strings are written here (`serde_json` also quotes
/// numbers and booleans used as keys; those are left to it).
struct KeyWriter<'a> {
    out: &'a mut Vec<u8>,
}

impl ser::Serializer for KeyWriter<'_> {
    type Ok = ();
    type Error = Error;
    type SerializeSeq = ser::Impossible<(), Error>;
    type SerializeTuple = ser::Impossible<(), Error>;
    type SerializeTupleStruct = ser::Impossible<(), Error>;
    type SerializeTupleVariant = ser::Impossible<(), Error>;
    type SerializeMap = ser::Impossible<(), Error>;
    type SerializeStruct = ser::Impossible<(), Error>;
    type SerializeStructVariant = ser::Impossible<(), Error>;

    fn serialize_str(self, v: &str) -> Result<(), Error> {
        push_str(self.out, v);
        Ok(())
    }
    fn serialize_char(self, v: char) -> Result<(), Error> {
        push_str(self.out, v.encode_utf8(&mut [0; 4]));
        Ok(())
    }
    fn serialize_unit_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
    ) -> Result<(), Error> {
        push_str(self.out, variant);
        Ok(())
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        value.serialize(self)
    }
    fn serialize_bool(self, _: bool) -> Result<(), Error> {
        Err(Error::Unsupported)
    }
    fn serialize_i8(self, _: i8) -> Result<(), Error> {
        Err(Error::Unsupported)
    }
    fn serialize_i16(self, _: i16) -> Result<(), Error> {
        Err(Error::Unsupported)
    }
    fn serialize_i32(self, _: i32) -> Result<(), Error> {
        Err(Error::Unsupported)
    }
    fn serialize_i64(self, _: i64) -> Result<(), Error> {
        Err(Error::Unsupported)
    }
    fn serialize_u8(self, _: u8) -> Result<(), Error> {
        Err(Error::Unsupported)
    }
    fn serialize_u16(self, _: u16) -> Result<(), Error> {
        Err(Error::Unsupported)
    }
    fn serialize_u32(self, _: u32) -> Result<(), Error> {
        Err(Error::Unsupported)
    }
    fn serialize_u64(self, _: u64) -> Result<(), Error> {
        Err(Error::Unsupported)
    }
    fn serialize_f32(self, _: f32) -> Result<(), Error> {
        Err(Error::Unsupported)
    }
    fn serialize_f64(self, _: f64) -> Result<(), Error> {
        Err(Error::Unsupported)
    }
    fn serialize_bytes(self, _: &[u8]) -> Result<(), Error> {
        Err(Error::Unsupported)
    }
    fn serialize_none(self) -> Result<(), Error> {
        Err(Error::Unsupported)
    }
    fn serialize_some<T: Serialize + ?Sized>(self, _: &T) -> Result<(), Error> {
        Err(Error::Unsupported)
    }
    fn serialize_unit(self) -> Result<(), Error> {
        Err(Error::Unsupported)
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result<(), Error> {
        Err(Error::Unsupported)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Result<(), Error> {
        Err(Error::Unsupported)
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Self::SerializeSeq, Error> {
        Err(Error::Unsupported)
    }
    fn serialize_tuple(self, _: usize) -> Result<Self::SerializeTuple, Error> {
        Err(Error::Unsupported)
    }
    fn serialize_tuple_struct(
        self,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleStruct, Error> {
        Err(Error::Unsupported)
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleVariant, Error> {
        Err(Error::Unsupported)
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Self::SerializeMap, Error> {
        Err(Error::Unsupported)
    }
    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Self::SerializeStruct, Error> {
        Err(Error::Unsupported)
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeStructVariant, Error> {
        Err(Error::Unsupported)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Serialize;
    use serde_json::json;

    fn same<T: Serialize + ?Sized>(value: &T) {
        let mut ours = Vec::new();
        append(&mut ours, value).expect("a supported shape");
        let theirs = serde_json::to_vec(value).expect("serde_json");
        assert_eq!(
            String::from_utf8_lossy(&ours),
            String::from_utf8_lossy(&theirs)
        );
    }

    #[test]
    fn strings_escape_as_serde_json_escapes() {
        let mut every_byte = String::new();
        for c in (0u8..0x80).map(char::from) {
            every_byte.push(c);
        }
        for text in [
            String::new(),
            "plain".into(),
            "a \"quoted\" \\ path/with\ttab\nand newline".into(),
            every_byte.clone(),
            every_byte.repeat(3),
            "é漢字🙂 \u{7f}\u{80}\u{2028}".into(),
            "x".repeat(15) + "\"" + &"y".repeat(16) + "\u{1}",
            "/tmp/permfs-resolve-bench.abc123/work/src/gen/m82.rs".into(),
        ] {
            same(&text);
            same(&json!({ text.clone(): [text.clone(), null, true] }));
        }
        same(&'\u{8}');
    }

    #[test]
    fn shapes_match_serde_json() {
        #[derive(Serialize)]
        #[serde(rename_all = "camelCase")]
        struct Inner {
            name_here: Option<String>,
            #[serde(skip_serializing_if = "Option::is_none")]
            skipped: Option<u8>,
            #[serde(skip_serializing_if = "std::ops::Not::not")]
            flag: bool,
            list: Vec<u32>,
            empty: Vec<String>,
        }
        #[derive(Serialize)]
        #[serde(rename_all = "snake_case")]
        enum Kind {
            UnitOne,
            Tuple(u8, i64),
            Struct { a: f64 },
        }
        #[derive(Serialize)]
        struct Outer {
            inner: Vec<Inner>,
            kinds: (Kind, Kind, Kind),
            numbers: (i8, u64, i128, f32, f64, f64),
            unit: (),
        }
        same(&Outer {
            inner: vec![
                Inner {
                    name_here: Some("n".into()),
                    skipped: None,
                    flag: true,
                    list: vec![1, 2, 3],
                    empty: vec![],
                },
                Inner {
                    name_here: None,
                    skipped: Some(4),
                    flag: false,
                    list: vec![],
                    empty: vec!["".into()],
                },
            ],
            kinds: (Kind::UnitOne, Kind::Tuple(1, -2), Kind::Struct { a: 0.1 }),
            numbers: (-8, u64::MAX, i128::MIN, 1.5, f64::NAN, 1e300),
            unit: (),
        });
    }

    #[test]
    fn other_shapes_fall_back_to_serde_json() {
        let value = std::collections::BTreeMap::from([(1u8, "one")]);
        let mut ours = Vec::new();
        assert!(matches!(append(&mut ours, &value), Err(Error::Unsupported)));
        let mut line = b"kept".to_vec();
        write_line(&mut line, &value).expect("serde_json writes it");
        assert_eq!(line, b"kept{\"1\":\"one\"}");
    }
}
