//! R12 namespaces: the compact-JSON word `ns=JSON` of a match or an insert, read into a value
//! and written back canonically (`json.dumps(value, ensure_ascii=True, separators=(",", ":"))`,
//! with space, `#`, `;`, `>` and `|` inside strings as `\u` escapes).
//!
//! Two namespaces are one only when they are equal values of the same shape: `0` is not
//! `"0"`, `[]` is not `""`.  Strings are kept as Unicode code points (a surrogate pair written
//! as two escapes is one code point, as Python reads it), integers as their canonical digits.

use std::fmt::Write;

/// The most characters a written namespace may have (prefixspec/vocabulary.py LONGEST_NAMESPACE).
const LONGEST: usize = 1000;

/// One part of an array namespace.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Part {
    Null,
    Int(String),
    Str(Vec<u32>),
}

/// A namespace: the default (written by leaving `ns=` out), an integer, a string or a flat array.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub enum Namespace {
    #[default]
    Default,
    Int(String),
    Str(Vec<u32>),
    Array(Vec<Part>),
}

const REFUSED: &str = "a namespace in JSON: an integer, a string or an array of null, integers and strings";

struct Reader<'a> {
    chars: Vec<char>,
    at: usize,
    _text: &'a str,
}

impl Reader<'_> {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.at).copied()
    }

    fn next(&mut self) -> Option<char> {
        let found = self.peek();
        self.at += 1;
        found
    }

    fn hex4(&mut self) -> Option<u32> {
        let mut value = 0;
        for _ in 0..4 {
            value = value * 16 + self.next()?.to_digit(16)?;
        }
        Some(value)
    }

    /// A JSON integer (a fraction or an exponent makes a float, which is refused).
    fn int(&mut self) -> Option<String> {
        let mut digits = String::new();
        if self.peek() == Some('-') {
            digits.push('-');
            self.at += 1;
        }
        match self.next()? {
            '0' => digits.push('0'),
            first @ '1'..='9' => {
                digits.push(first);
                while let Some(digit @ '0'..='9') = self.peek() {
                    digits.push(digit);
                    self.at += 1;
                }
            }
            _ => return None,
        }
        if matches!(self.peek(), Some('.' | 'e' | 'E')) {
            return None;
        }
        Some(if digits == "-0" { "0".to_string() } else { digits })
    }

    fn string(&mut self) -> Option<Vec<u32>> {
        if self.next()? != '"' {
            return None;
        }
        let mut points = Vec::new();
        loop {
            match self.next()? {
                '"' => return Some(points),
                '\\' => {
                    let point = match self.next()? {
                        '"' => '"' as u32,
                        '\\' => '\\' as u32,
                        '/' => '/' as u32,
                        'b' => 8,
                        'f' => 12,
                        'n' => 10,
                        'r' => 13,
                        't' => 9,
                        'u' => {
                            let first = self.hex4()?;
                            // Python joins a high surrogate and the low one escaped right after it.
                            if (0xd800..0xdc00).contains(&first) && self.chars.get(self.at) == Some(&'\\') && self.chars.get(self.at + 1) == Some(&'u') {
                                let save = self.at;
                                self.at += 2;
                                match self.hex4() {
                                    Some(second) if (0xdc00..0xe000).contains(&second) => 0x10000 + ((first - 0xd800) << 10) + (second - 0xdc00),
                                    _ => {
                                        self.at = save;
                                        first
                                    }
                                }
                            } else {
                                first
                            }
                        }
                        _ => return None,
                    };
                    points.push(point);
                }
                control if (control as u32) < 0x20 => return None,
                other => points.push(other as u32),
            }
        }
    }

    fn part(&mut self) -> Option<Part> {
        match self.peek()? {
            '"' => self.string().map(Part::Str),
            'n' => {
                for expected in "null".chars() {
                    if self.next()? != expected {
                        return None;
                    }
                }
                Some(Part::Null)
            }
            _ => self.int().map(Part::Int),
        }
    }

    fn skip_space(&mut self) {
        while matches!(self.peek(), Some(' ' | '\t' | '\n' | '\r')) {
            self.at += 1;
        }
    }

    fn namespace(&mut self) -> Option<Namespace> {
        self.skip_space();
        let found = match self.peek()? {
            '[' => {
                self.at += 1;
                let mut parts = Vec::new();
                self.skip_space();
                if self.peek() == Some(']') {
                    self.at += 1;
                } else {
                    loop {
                        self.skip_space();
                        parts.push(self.part()?);
                        self.skip_space();
                        match self.next()? {
                            ',' => continue,
                            ']' => break,
                            _ => return None,
                        }
                    }
                }
                Namespace::Array(parts)
            }
            '"' => Namespace::Str(self.string()?),
            _ => Namespace::Int(self.int()?),
        };
        self.skip_space();
        (self.at == self.chars.len()).then_some(found)
    }
}

impl Namespace {
    /// The namespace one word of JSON stands for; a message naming what it is instead.
    pub fn read(text: &str) -> Result<Namespace, String> {
        if text.chars().count() > LONGEST {
            return Err(format!("a namespace of at most {LONGEST} characters"));
        }
        let mut reader = Reader { chars: text.chars().collect(), at: 0, _text: text };
        reader.namespace().ok_or_else(|| REFUSED.to_string())
    }

    /// The canonical word, without `ns=`; None for the default namespace.
    pub fn render(&self) -> Option<String> {
        let mut out = String::new();
        match self {
            Namespace::Default => return None,
            Namespace::Int(digits) => out.push_str(digits),
            Namespace::Str(points) => render_string(points, &mut out),
            Namespace::Array(parts) => {
                out.push('[');
                for (index, part) in parts.iter().enumerate() {
                    if index > 0 {
                        out.push(',');
                    }
                    match part {
                        Part::Null => out.push_str("null"),
                        Part::Int(digits) => out.push_str(digits),
                        Part::Str(points) => render_string(points, &mut out),
                    }
                }
                out.push(']');
            }
        }
        Some(out)
    }

    /// ` ns=WORD` outside the default namespace, nothing in it.
    pub fn suffix(&self) -> String {
        self.render().map_or_else(String::new, |word| format!(" ns={word}"))
    }
}

fn render_string(points: &[u32], out: &mut String) {
    out.push('"');
    for &point in points {
        match point {
            0x22 => out.push_str("\\\""),
            0x5c => out.push_str("\\\\"),
            0x0a => out.push_str("\\n"),
            0x0d => out.push_str("\\r"),
            0x09 => out.push_str("\\t"),
            0x08 => out.push_str("\\b"),
            0x0c => out.push_str("\\f"),
            // The word holds no space, '#', ';', '>' or '|'.
            0x20 | 0x23 | 0x3b | 0x3e | 0x7c => {
                let _ = write!(out, "\\u{point:04x}");
            }
            0x21..=0x7e => out.push(char::from_u32(point).unwrap_or('?')),
            0x10000.. => {
                let value = point - 0x10000;
                let _ = write!(out, "\\u{:04x}\\u{:04x}", 0xd800 + (value >> 10), 0xdc00 + (value & 0x3ff));
            }
            _ => {
                let _ = write!(out, "\\u{point:04x}");
            }
        }
    }
    out.push('"');
}
