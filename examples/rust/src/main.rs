//! `prefixcache`: the radix cache of `cache.rs` behind the prefixspec line protocol.
//!
//!     prefixcache            serve the protocol on stdin/stdout (docs/protocol.md)
//!     prefixcache record     read a trace's calls on stdin, write them with this engine's
//!                            results on stdout: a recorded trace for `prefixspec verify`
//!
//! `PREFIXCACHE_BUG=name` plants one of the bugs of `cache::Bug` (see `--help`).

mod cache;
mod namespace;

use std::collections::HashMap;
use std::io::{self, BufRead, Write};
use std::process::ExitCode;

use cache::{Bug, CacheError, ErrorKind, Event, NodeId, RadixCache, ROOT};
use namespace::Namespace;

const PROTOCOL: &str = "prefixspec-protocol 1";
const TRACE_HEADER: &str = "prefixspec-trace 1";
const ENGINE: &str = concat!("prefixcache-rs ", env!("CARGO_PKG_VERSION"));
const ID_LIMIT: i128 = 1 << 32;
/// The features of the handshake's answer (docs/protocol.md): R12 and R13.
const FEATURES: &str = "features=namespaces,events";

/// A call as the trace format writes it (fixtures/README.md), plus the protocol's own lines.
enum Call {
    Hello(String),
    BlockSize(i128),
    Match { name: String, tokens: Vec<i128>, namespace: Namespace },
    Insert { name: String, tokens: Vec<i128>, blocks: Vec<i128>, namespace: Namespace },
    Lock(String),
    Unlock(String),
    Evict(i128),
    Query(String),
    Snapshot,
    TakeEvents,
}

/// What a call answered; nodes are still ids, rendered by the caller.
enum Answer {
    Ok,
    Match { matched: usize, blocks: Vec<u32>, node: NodeId },
    Inserted { node: NodeId, duplicates: Vec<u32> },
    Freed(Vec<u32>),
    Text(String),
}

/// A number as written; out-of-range values stay out of range (i128::MAX) for the cache to refuse.
fn parse_number(word: &str) -> Result<i128, String> {
    let digits = word.strip_prefix('-').unwrap_or(word);
    if digits.is_empty() || !digits.bytes().all(|byte| byte.is_ascii_digit()) {
        return Err(format!("{word:?} is not a whole number"));
    }
    Ok(word.parse::<i128>().unwrap_or(if word.starts_with('-') { i128::MIN } else { i128::MAX }))
}

fn parse_list(text: &str) -> Result<Vec<i128>, String> {
    text.split_whitespace().map(parse_number).collect()
}

/// The `[...]` lists of `rest` and what is left outside them.
fn lists(rest: &str) -> Result<(Vec<Vec<i128>>, String), String> {
    let mut found = Vec::new();
    let mut outside = String::new();
    let mut remaining = rest;
    while let Some(open) = remaining.find('[') {
        outside.push_str(&remaining[..open]);
        let close = remaining[open..].find(']').ok_or("a '[' without its ']'")? + open;
        found.push(parse_list(&remaining[open + 1..close])?);
        remaining = &remaining[close + 1..];
    }
    outside.push_str(remaining);
    Ok((found, outside.trim().to_string()))
}

fn parse_call(line: &str) -> Result<Call, String> {
    if let Some(version) = line.strip_prefix("prefixspec-protocol") {
        return Ok(Call::Hello(version.trim().to_string()));
    }
    let (name, text) = match line.split_once('=') {
        Some((name, text)) => (name.trim().to_string(), text.trim()),
        None => (String::new(), line),
    };
    let (op, rest) = text.split_once(char::is_whitespace).unwrap_or((text, ""));
    let mut rest = rest.trim();
    // R12: a match or an insert may end with `ns=JSON`, which may hold '[' or '=' inside strings.
    let mut namespace = Namespace::Default;
    if op == "match" || op == "insert" {
        if let Some((before, word)) = rest.rsplit_once(char::is_whitespace) {
            if let Some(json) = word.strip_prefix("ns=") {
                namespace = Namespace::read(json)?;
                rest = before.trim_end();
            }
        }
    }
    let (found, outside) = lists(rest)?;
    match op {
        "match" if found.len() == 1 && outside.is_empty() && !name.is_empty() => {
            Ok(Call::Match { name, tokens: found.into_iter().next().unwrap_or_default(), namespace })
        }
        "insert" if found.len() == 2 && outside.is_empty() && !name.is_empty() => {
            let mut both = found.into_iter();
            let tokens = both.next().unwrap_or_default();
            Ok(Call::Insert { name, tokens, blocks: both.next().unwrap_or_default(), namespace })
        }
        "lock" | "unlock" if found.is_empty() && !rest.is_empty() && !rest.contains(char::is_whitespace) => {
            Ok(if op == "lock" { Call::Lock(rest.to_string()) } else { Call::Unlock(rest.to_string()) })
        }
        "evict" if found.is_empty() => Ok(Call::Evict(parse_number(rest)?)),
        "block_size" if found.is_empty() => Ok(Call::BlockSize(parse_number(rest)?)),
        "stats" | "cached_tokens" | "cached_blocks" | "evictable_blocks" | "hit_rate" if rest.is_empty() => {
            Ok(Call::Query(op.to_string()))
        }
        "snapshot" if rest.is_empty() => Ok(Call::Snapshot),
        "take_events" if rest.is_empty() && name.is_empty() => Ok(Call::TakeEvents),
        _ => Err(format!("cannot read the call {line:?}")),
    }
}

fn ids(values: &[i128], what: &str) -> Result<Vec<u32>, CacheError> {
    values
        .iter()
        .map(|value| {
            if (0..ID_LIMIT).contains(value) {
                Ok(*value as u32)
            } else {
                Err(CacheError::new(ErrorKind::InvalidArgument, format!("{what} {value} is outside [0, 2**32)")))
            }
        })
        .collect()
}

fn render_ints(values: &[u32]) -> String {
    let words: Vec<String> = values.iter().map(u32::to_string).collect();
    format!("[{}]", words.join(" "))
}

/// The answer to `take_events` (R13): `none`, or the events joined by ` ; `.
fn render_events(events: &[Event]) -> String {
    if events.is_empty() {
        return "none".to_string();
    }
    let texts: Vec<String> = events
        .iter()
        .map(|event| match event {
            Event::Stored { parent, tokens, blocks, namespace } => format!(
                "stored {} {} {}{}",
                parent.map_or_else(|| "-".to_string(), |block| block.to_string()),
                render_ints(tokens),
                render_ints(blocks),
                namespace.suffix()
            ),
            Event::Removed(blocks) => format!("removed {}", render_ints(blocks)),
        })
        .collect();
    texts.join(" ; ")
}

/// One cache and the handles its calls named.
struct Session {
    cache: RadixCache,
    handles: HashMap<String, NodeId>,
}

impl Session {
    fn new(block_size: i128, bug: Option<Bug>) -> Result<Session, CacheError> {
        if block_size < 1 || block_size > 1 << 20 {
            return Err(CacheError::new(ErrorKind::InvalidArgument, format!("block_size {block_size} is not in [1, 2**20]")));
        }
        Ok(Session { cache: RadixCache::new(block_size as usize, bug)?, handles: HashMap::new() })
    }

    fn handle(&self, name: &str) -> Result<NodeId, CacheError> {
        if name == "root" {
            return Ok(ROOT);
        }
        self.handles
            .get(name)
            .copied()
            .ok_or_else(|| CacheError::new(ErrorKind::UnknownNode, format!("no call named a node {name}")))
    }

    fn run(&mut self, call: &Call) -> Result<Answer, CacheError> {
        let cache = &mut self.cache;
        match call {
            Call::Match { name, tokens, namespace } => {
                let found = cache.match_prefix(&ids(tokens, "token")?, namespace);
                self.handles.insert(name.clone(), found.node);
                Ok(Answer::Match { matched: found.matched_tokens, blocks: found.blocks, node: found.node })
            }
            Call::Insert { name, tokens, blocks, namespace } => {
                let tokens = ids(tokens, "token")?;
                let done = cache.insert(&tokens, &ids(blocks, "block")?, namespace)?;
                self.handles.insert(name.clone(), done.node);
                Ok(Answer::Inserted { node: done.node, duplicates: done.duplicates })
            }
            Call::Lock(name) => {
                let node = self.handle(name)?;
                self.cache.lock(node).map(|_| Answer::Ok)
            }
            Call::Unlock(name) => {
                let node = self.handle(name)?;
                self.cache.unlock(node).map(|_| Answer::Ok)
            }
            Call::Evict(count) => {
                if *count < 0 {
                    return Err(CacheError::new(ErrorKind::InvalidArgument, format!("evict {count}: must be >= 0")));
                }
                Ok(Answer::Freed(cache.evict(u64::try_from(*count).unwrap_or(u64::MAX))))
            }
            Call::Query(op) => Ok(Answer::Text(match op.as_str() {
                "stats" => {
                    let s = cache.stats();
                    format!(
                        "lookups={} query_tokens={} hit_tokens={} inserted_blocks={} evicted_blocks={}",
                        s.lookups, s.query_tokens, s.hit_tokens, s.inserted_blocks, s.evicted_blocks
                    )
                }
                "cached_tokens" => cache.cached_tokens().to_string(),
                "cached_blocks" => cache.cached_blocks().to_string(),
                "evictable_blocks" => cache.evictable_blocks().to_string(),
                _ => format!("{:?}", cache.hit_rate()),
            })),
            Call::Snapshot => {
                let Answer::Text(stats) = self.run(&Call::Query("stats".to_string()))? else { unreachable!() };
                let nodes = self.cache.snapshot();
                let mut text = format!("{stats} nodes={}", nodes.len());
                for view in nodes {
                    text.push_str(&format!(
                        " {} {} {}{}",
                        render_ints(&view.prefix),
                        render_ints(&view.blocks),
                        view.locks,
                        view.namespace.suffix()
                    ));
                }
                Ok(Answer::Text(text))
            }
            Call::TakeEvents => Ok(Answer::Text(render_events(&self.cache.take_events()))),
            Call::Hello(_) | Call::BlockSize(_) => unreachable!("handled by the loop"),
        }
    }
}

fn bug_from_env() -> Result<Option<Bug>, String> {
    match std::env::var("PREFIXCACHE_BUG") {
        Err(_) => Ok(None),
        Ok(name) if name.is_empty() => Ok(None),
        Ok(name) => Bug::from_name(&name).map(Some).ok_or_else(|| {
            let known: Vec<&str> = Bug::ALL.iter().map(|(known, _)| *known).collect();
            format!("PREFIXCACHE_BUG={name} is not a planted bug (known: {})", known.join(", "))
        }),
    }
}

/// The protocol: one answer line per call line, `CALL -> RESULT`, nodes as ids.
fn serve(bug: Option<Bug>) -> io::Result<()> {
    let stdin = io::stdin();
    let mut out = io::BufWriter::new(io::stdout().lock());
    let mut session: Option<Session> = None;
    let mut greeted = false;
    for line in stdin.lock().lines() {
        let line = line?;
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let result = match parse_call(line) {
            Err(message) => format!("ProtocolError {message}"),
            Ok(Call::Hello(version)) => {
                greeted = format!("prefixspec-protocol {version}") == PROTOCOL;
                if greeted {
                    format!("ok {ENGINE} {FEATURES}")
                } else {
                    format!("ProtocolError this engine speaks {PROTOCOL}")
                }
            }
            Ok(_) if !greeted => format!("ProtocolError expected the handshake {PROTOCOL:?} first"),
            Ok(Call::BlockSize(size)) => match Session::new(size, bug) {
                Ok(fresh) => {
                    session = Some(fresh);
                    "ok".to_string()
                }
                Err(error) => format!("{} {}", error.name(), error.message),
            },
            Ok(call) => match session.as_mut() {
                None => "ProtocolError no cache yet: send block_size B first".to_string(),
                Some(session) => match session.run(&call) {
                    Ok(Answer::Ok) => "ok".to_string(),
                    Ok(Answer::Match { matched, blocks, node }) => format!("{matched} {} {}", render_ints(&blocks), node_id(node)),
                    Ok(Answer::Inserted { node, duplicates }) => format!("{} {}", node_id(node), render_ints(&duplicates)),
                    Ok(Answer::Freed(blocks)) => render_ints(&blocks),
                    Ok(Answer::Text(text)) => text,
                    Err(error) => format!("{} {}", error.name(), error.message),
                },
            },
        };
        writeln!(out, "{line} -> {result}")?;
        out.flush()?;
    }
    Ok(())
}

fn node_id(node: NodeId) -> String {
    if node == ROOT {
        "root".to_string()
    } else {
        node.to_string()
    }
}

/// Recording: a trace's calls in, the same calls with this engine's results out.
/// A node is written `root`, the first handle that returned it, or `new`.
fn record(bug: Option<Bug>) -> Result<(), String> {
    let stdin = io::stdin();
    let mut out = io::BufWriter::new(io::stdout().lock());
    let mut session: Option<Session> = None;
    let mut first_name: HashMap<NodeId, String> = HashMap::new();
    let mut seen_header = false;
    let write_error = |error: io::Error| error.to_string();
    for (number, line) in stdin.lock().lines().enumerate() {
        let line = line.map_err(write_error)?;
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let at = |message: String| format!("line {}: {message}", number + 1);
        if !seen_header {
            if line != TRACE_HEADER {
                return Err(at(format!("expected {TRACE_HEADER:?}")));
            }
            seen_header = true;
            continue;
        }
        if line.starts_with("rules ") {
            // The rule set the trace's results follow: the checker's side, copied into the record.
            writeln!(out, "{line}").map_err(write_error)?;
            continue;
        }
        let call_text = line.split_once("->").map_or(line, |(call, _)| call).trim();
        let call = parse_call(call_text).map_err(at)?;
        let Some(session) = session.as_mut() else {
            let Call::BlockSize(size) = call else { return Err(at("expected block_size B".to_string())) };
            session = Some(Session::new(size, bug).map_err(|error| at(error.message))?);
            writeln!(out, "{TRACE_HEADER}\n# recorded by {ENGINE}\nblock_size {size}").map_err(write_error)?;
            continue;
        };
        let mut render = |node: NodeId, name: &str| -> String {
            if node == ROOT {
                return "root".to_string();
            }
            match first_name.get(&node) {
                Some(first) => first.clone(),
                None => {
                    first_name.insert(node, name.to_string());
                    "new".to_string()
                }
            }
        };
        let result = match (&call, session.run(&call)) {
            (_, Err(error)) => error.name().to_string(),
            (Call::Match { name, .. }, Ok(Answer::Match { matched, blocks, node })) => {
                format!("{matched} {} {}", render_ints(&blocks), render(node, name))
            }
            (Call::Insert { name, .. }, Ok(Answer::Inserted { node, duplicates })) => {
                format!("{} {}", render(node, name), render_ints(&duplicates))
            }
            (_, Ok(Answer::Ok)) => "ok".to_string(),
            (_, Ok(Answer::Freed(blocks))) => render_ints(&blocks),
            (_, Ok(Answer::Text(text))) => text,
            (_, Ok(_)) => unreachable!("a node answer of a call that names none"),
        };
        writeln!(out, "{call_text} -> {result}").map_err(write_error)?;
    }
    out.flush().map_err(write_error)
}

fn main() -> ExitCode {
    let bug = match bug_from_env() {
        Ok(bug) => bug,
        Err(message) => {
            eprintln!("prefixcache: {message}");
            return ExitCode::from(2);
        }
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    let outcome = match args.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
        [] => serve(bug).map_err(|error| error.to_string()),
        ["record"] => record(bug),
        _ => {
            let bugs: Vec<&str> = Bug::ALL.iter().map(|(name, _)| *name).collect();
            eprintln!(
                "usage: prefixcache            serve the prefixspec line protocol on stdin/stdout\n       \
                 prefixcache record     calls on stdin -> recorded trace on stdout\n\
                 PREFIXCACHE_BUG=NAME plants a bug: {}",
                bugs.join(", ")
            );
            return ExitCode::from(2);
        }
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("prefixcache: {message}");
            ExitCode::from(1)
        }
    }
}
