//! A block-granular prefix cache on a radix tree, as a serving engine keeps one.
//!
//! Written from the rules in `spec/README.md`, not from the spec's code: the
//! tree is an arena of nodes keyed by never-reused ids, every edge holds whole
//! blocks, children are found by the tokens of their first block, a lock is
//! counted on the node and summed up its path so that eviction can tell pinned
//! subtrees in O(1), and eviction pops the least recently used unpinned leaf
//! from a heap, pushing a parent when it becomes an unpinned leaf itself.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};

use crate::namespace::Namespace;

/// A node handle. The root is 0; every other node gets the next id, never reused.
pub type NodeId = u64;
pub const ROOT: NodeId = 0;
/// The root of every namespace but the default (R12) is a hidden node with an empty edge,
/// made on the namespace's first insert; its id is this plus the namespace's index. A call
/// is never answered with one: it is `root` to the caller, as the default's root is.
const NAMESPACE_ROOTS: NodeId = 1 << 62;

/// The errors of the interface, by the names the protocol writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ErrorKind {
    InvalidArgument,
    UnknownNode,
    NotLocked,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheError {
    pub kind: ErrorKind,
    pub message: String,
}

impl CacheError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        CacheError { kind, message: message.into() }
    }

    pub fn name(&self) -> &'static str {
        match self.kind {
            ErrorKind::InvalidArgument => "InvalidArgument",
            ErrorKind::UnknownNode => "UnknownNode",
            ErrorKind::NotLocked => "NotLocked",
        }
    }
}

fn invalid(message: impl Into<String>) -> CacheError {
    CacheError::new(ErrorKind::InvalidArgument, message)
}

/// Planted bugs, selected by `PREFIXCACHE_BUG=name`, so that the checker can be seen to catch them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bug {
    /// `lock` accepts the node and pins nothing: a running request's blocks can be evicted.
    LockPinsNothing,
    /// eviction takes the most recently used leaf first.
    EvictNewestFirst,
    /// `insert` never hands duplicates back, so the caller leaks their blocks.
    NoDuplicates,
    /// `match` searches the whole prompt, leaving no token to compute.
    MatchWholePrompt,
    /// the engine panics when a match splits a node (a crash, not a wrong answer).
    PanicOnSplit,
}

impl Bug {
    pub const ALL: [(&'static str, Bug); 5] = [
        ("lock_pins_nothing", Bug::LockPinsNothing),
        ("evict_newest_first", Bug::EvictNewestFirst),
        ("no_duplicates", Bug::NoDuplicates),
        ("match_whole_prompt", Bug::MatchWholePrompt),
        ("panic_on_split", Bug::PanicOnSplit),
    ];

    pub fn from_name(name: &str) -> Option<Bug> {
        Bug::ALL.iter().find(|(known, _)| *known == name).map(|(_, bug)| *bug)
    }
}

struct Node {
    parent: NodeId,
    /// The tokens from the parent's end to this node's end: a whole number of blocks.
    edge: Vec<u32>,
    /// One block id per block of `edge`.
    blocks: Vec<u32>,
    /// Children by the tokens of the first block of their edge.
    children: HashMap<Vec<u32>, NodeId>,
    own_locks: u64,
    /// The own locks of this node and of every node below it: pinned while above zero.
    subtree_locks: u64,
    last_use: u64,
    /// Tokens from the root to this node's end.
    depth: usize,
    /// The namespace's index in `RadixCache::namespaces` (R12).
    ns: usize,
}

/// R13: what the cache publishes for a router to mirror it.
pub enum Event {
    /// New blocks an insert cached, in token order, under the block `parent` (None: the namespace's first).
    Stored { parent: Option<u32>, tokens: Vec<u32>, blocks: Vec<u32>, namespace: Namespace },
    /// Blocks an evict freed, in the order it returned them.
    Removed(Vec<u32>),
}

pub struct Match {
    pub matched_tokens: usize,
    pub blocks: Vec<u32>,
    pub node: NodeId,
}

pub struct Inserted {
    pub node: NodeId,
    pub duplicates: Vec<u32>,
}

#[derive(Default, Clone, Copy)]
pub struct Stats {
    pub lookups: u64,
    pub query_tokens: u64,
    pub hit_tokens: u64,
    pub inserted_blocks: u64,
    pub evicted_blocks: u64,
}

/// One node of a snapshot: its whole prefix, its own blocks, its own locks.
pub struct NodeView {
    pub prefix: Vec<u32>,
    pub blocks: Vec<u32>,
    pub locks: u64,
    pub namespace: Namespace,
}

pub struct RadixCache {
    block_size: usize,
    nodes: HashMap<NodeId, Node>,
    next_id: NodeId,
    clock: u64,
    held: HashSet<u32>,
    stats: Stats,
    bug: Option<Bug>,
    /// Every namespace called so far, the default first, and the root of each (R12).
    namespaces: Vec<Namespace>,
    roots: HashMap<Namespace, NodeId>,
    events: Vec<Event>,
}

impl Node {
    /// A root holding nothing: the default namespace's (`ns` 0) or a namespace's hidden one.
    fn empty_root(ns: usize) -> Node {
        Node {
            parent: ROOT,
            edge: Vec::new(),
            blocks: Vec::new(),
            children: HashMap::new(),
            own_locks: 0,
            subtree_locks: 0,
            last_use: 0,
            depth: 0,
            ns,
        }
    }
}

impl RadixCache {
    pub fn new(block_size: usize, bug: Option<Bug>) -> Result<Self, CacheError> {
        if block_size < 1 {
            return Err(invalid("block_size must be at least 1"));
        }
        let root = Node::empty_root(0);
        let mut nodes = HashMap::new();
        nodes.insert(ROOT, root);
        let mut roots = HashMap::new();
        roots.insert(Namespace::Default, ROOT);
        Ok(RadixCache {
            block_size,
            nodes,
            next_id: 1,
            clock: 0,
            held: HashSet::new(),
            stats: Stats::default(),
            bug,
            namespaces: vec![Namespace::Default],
            roots,
            events: Vec::new(),
        })
    }

    /// The root of `namespace`, made when `create` and it has none yet.
    fn root_of(&mut self, namespace: &Namespace, create: bool) -> Option<NodeId> {
        if let Some(root) = self.roots.get(namespace) {
            return Some(*root);
        }
        if !create {
            return None;
        }
        let ns = self.namespaces.len();
        let id = NAMESPACE_ROOTS + ns as NodeId;
        self.namespaces.push(namespace.clone());
        self.roots.insert(namespace.clone(), id);
        let root = Node::empty_root(ns);
        self.nodes.insert(id, root);
        Some(id)
    }

    /// The events published since the last take (R13).
    pub fn take_events(&mut self) -> Vec<Event> {
        std::mem::take(&mut self.events)
    }

    fn node(&self, id: NodeId) -> &Node {
        self.nodes.get(&id).expect("a live node")
    }

    fn node_mut(&mut self, id: NodeId) -> &mut Node {
        self.nodes.get_mut(&id).expect("a live node")
    }

    /// Whole blocks in common between `edge` and `key`, in tokens (at most both lengths).
    fn common_blocks(&self, edge: &[u32], key: &[u32]) -> usize {
        let b = self.block_size;
        let mut common = 0;
        while common + b <= edge.len() && common + b <= key.len() && edge[common..common + b] == key[common..common + b] {
            common += b;
        }
        common
    }

    /// Split `child` after `at` tokens of its edge: a new node takes the upper part
    /// and `child` keeps its id, locks and last use with the lower part.
    fn split(&mut self, child: NodeId, at: usize) -> NodeId {
        if self.bug == Some(Bug::PanicOnSplit) {
            panic!("planted bug panic_on_split: splitting node {child}");
        }
        let b = self.block_size;
        let id = self.next_id;
        self.next_id += 1;
        let clock = self.clock;
        let lower = self.node_mut(child);
        let upper_edge: Vec<u32> = lower.edge.drain(..at).collect();
        let upper_blocks: Vec<u32> = lower.blocks.drain(..at / b).collect();
        let parent = lower.parent;
        lower.parent = id;
        let subtree_locks = lower.subtree_locks;
        let depth = lower.depth - lower.edge.len();
        let mut children = HashMap::new();
        children.insert(lower.edge[..b].to_vec(), child);
        let key = upper_edge[..b].to_vec();
        let ns = lower.ns;
        let upper = Node { parent, edge: upper_edge, blocks: upper_blocks, children, own_locks: 0, subtree_locks, last_use: clock, depth, ns };
        self.nodes.insert(id, upper);
        self.node_mut(parent).children.insert(key, id);
        id
    }

    /// Walk down along `key` (whole blocks), splitting the node the walk ends inside.
    /// Returns the nodes passed, root excluded, and the tokens matched.
    fn descend(&mut self, start: NodeId, key: &[u32]) -> (Vec<NodeId>, usize) {
        let b = self.block_size;
        let mut node = start;
        let mut pos = 0;
        let mut path = Vec::new();
        while pos + b <= key.len() {
            let child = match self.node(node).children.get(&key[pos..pos + b]) {
                Some(child) => *child,
                None => break,
            };
            let edge_len = self.node(child).edge.len();
            let common = self.common_blocks(&self.node(child).edge, &key[pos..]);
            if common < edge_len {
                path.push(self.split(child, common));
                pos += common;
                break;
            }
            path.push(child);
            node = child;
            pos += edge_len;
        }
        (path, pos)
    }

    /// The cached block ids along `key`, without changing anything.
    fn cached_along(&self, start: NodeId, key: &[u32]) -> Vec<u32> {
        let b = self.block_size;
        let mut node = start;
        let mut pos = 0;
        let mut found = Vec::new();
        while pos + b <= key.len() {
            let child = match self.node(node).children.get(&key[pos..pos + b]) {
                Some(child) => *child,
                None => break,
            };
            let edge = &self.node(child).edge;
            let common = self.common_blocks(edge, &key[pos..]);
            found.extend_from_slice(&self.node(child).blocks[..common / b]);
            if common < edge.len() {
                break;
            }
            node = child;
            pos += common;
        }
        found
    }

    fn touch(&mut self, path: &[NodeId]) {
        let clock = self.clock;
        for id in path {
            self.node_mut(*id).last_use = clock;
        }
    }

    pub fn match_prefix(&mut self, tokens: &[u32], namespace: &Namespace) -> Match {
        let b = self.block_size;
        let n = tokens.len();
        let usable = if self.bug == Some(Bug::MatchWholePrompt) {
            n / b * b
        } else if n == 0 {
            0
        } else {
            (n - 1) / b * b
        };
        self.clock += 1;
        let (path, matched) = match self.root_of(namespace, false) {
            Some(start) => self.descend(start, &tokens[..usable]),
            None => (Vec::new(), 0),
        };
        self.touch(&path);
        let mut blocks = Vec::with_capacity(matched / b);
        for id in &path {
            blocks.extend_from_slice(&self.node(*id).blocks);
        }
        self.stats.lookups += 1;
        self.stats.query_tokens += n as u64;
        self.stats.hit_tokens += matched as u64;
        Match { matched_tokens: matched, blocks, node: path.last().copied().unwrap_or(ROOT) }
    }

    pub fn insert(&mut self, tokens: &[u32], blocks: &[u32], namespace: &Namespace) -> Result<Inserted, CacheError> {
        let b = self.block_size;
        let whole = tokens.len() / b;
        if blocks.len() != whole {
            return Err(invalid(format!("{} tokens take {} blocks, got {}", tokens.len(), whole, blocks.len())));
        }
        let mut seen = HashSet::with_capacity(whole);
        for block in blocks {
            if !seen.insert(*block) {
                return Err(invalid(format!("block {block} is repeated within the call")));
            }
        }
        let key = &tokens[..whole * b];
        let start = self.root_of(namespace, false);
        let cached = start.map_or_else(Vec::new, |start| self.cached_along(start, key));
        for (position, block) in blocks.iter().enumerate() {
            if cached.get(position) != Some(block) && self.held.contains(block) {
                return Err(invalid(format!("block {block} is cached at another position")));
            }
        }
        self.clock += 1;
        if whole == 0 {
            return Ok(Inserted { node: ROOT, duplicates: Vec::new() });
        }
        let start = start.or_else(|| self.root_of(namespace, true)).expect("a namespace's root");
        let (mut path, pos) = self.descend(start, key);
        let mut duplicates = Vec::new();
        if self.bug != Some(Bug::NoDuplicates) {
            for (position, held) in cached.iter().enumerate() {
                if *held != blocks[position] {
                    duplicates.push(blocks[position]);
                }
            }
        }
        if pos < key.len() {
            let parent = path.last().copied().unwrap_or(start);
            let id = self.next_id;
            self.next_id += 1;
            let fresh = blocks[pos / b..].to_vec();
            let below = if pos == 0 { None } else { Some(cached[pos / b - 1]) };
            self.events.push(Event::Stored {
                parent: below,
                tokens: key[pos..].to_vec(),
                blocks: fresh.clone(),
                namespace: namespace.clone(),
            });
            let ns = self.node(start).ns;
            self.held.extend(fresh.iter().copied());
            self.stats.inserted_blocks += fresh.len() as u64;
            let leaf = Node {
                parent,
                edge: key[pos..].to_vec(),
                blocks: fresh,
                children: HashMap::new(),
                own_locks: 0,
                subtree_locks: 0,
                last_use: self.clock,
                depth: key.len(),
                ns,
            };
            self.nodes.insert(id, leaf);
            self.node_mut(parent).children.insert(key[pos..pos + b].to_vec(), id);
            path.push(id);
        }
        self.touch(&path);
        Ok(Inserted { node: *path.last().expect("a whole block was inserted"), duplicates })
    }

    fn live(&self, node: NodeId) -> Result<(), CacheError> {
        if self.nodes.contains_key(&node) {
            Ok(())
        } else {
            Err(CacheError::new(ErrorKind::UnknownNode, format!("node {node} is not in the cache")))
        }
    }

    /// Add `delta` (+1 or -1) to the subtree lock count of `node` and of every ancestor below the root.
    fn add_to_path(&mut self, node: NodeId, delta: i64) {
        let mut at = node;
        while at != ROOT {
            let current = self.node_mut(at);
            current.subtree_locks = (current.subtree_locks as i64 + delta) as u64;
            at = current.parent;
        }
    }

    pub fn lock(&mut self, node: NodeId) -> Result<(), CacheError> {
        if node == ROOT {
            return Ok(());
        }
        self.live(node)?;
        if self.bug == Some(Bug::LockPinsNothing) {
            return Ok(());
        }
        self.node_mut(node).own_locks += 1;
        self.add_to_path(node, 1);
        Ok(())
    }

    pub fn unlock(&mut self, node: NodeId) -> Result<(), CacheError> {
        if node == ROOT {
            return Ok(());
        }
        self.live(node)?;
        if self.node(node).own_locks == 0 {
            return Err(CacheError::new(ErrorKind::NotLocked, format!("node {node} holds no lock")));
        }
        self.node_mut(node).own_locks -= 1;
        self.add_to_path(node, -1);
        Ok(())
    }

    fn evictable_leaf(&self, id: NodeId) -> bool {
        let node = self.node(id);
        !node.edge.is_empty() && node.children.is_empty() && node.subtree_locks == 0
    }

    pub fn evict(&mut self, n_blocks: u64) -> Vec<u32> {
        // Ordered by last use, oldest first (newest first under the planted bug); the id only breaks
        // ties, which the rules rule out: nodes used by one call lie on one path, one leaf at most.
        let newest_first = self.bug == Some(Bug::EvictNewestFirst);
        let order = |node: &Node, id: NodeId| if newest_first { (u64::MAX - node.last_use, id) } else { (node.last_use, id) };
        let mut heap: BinaryHeap<Reverse<(u64, NodeId)>> = BinaryHeap::new();
        for (id, node) in &self.nodes {
            if self.evictable_leaf(*id) {
                heap.push(Reverse(order(node, *id)));
            }
        }
        let mut freed = Vec::new();
        while (freed.len() as u64) < n_blocks {
            let Some(Reverse((_, id))) = heap.pop() else { break };
            let node = self.nodes.remove(&id).expect("a live leaf");
            for block in &node.blocks {
                self.held.remove(block);
            }
            freed.extend_from_slice(&node.blocks);
            let parent = node.parent;
            let b = self.block_size;
            self.node_mut(parent).children.remove(&node.edge[..b]);
            if self.evictable_leaf(parent) {
                heap.push(Reverse(order(self.node(parent), parent)));
            }
        }
        self.stats.evicted_blocks += freed.len() as u64;
        if !freed.is_empty() {
            self.events.push(Event::Removed(freed.clone()));
        }
        freed
    }

    pub fn cached_blocks(&self) -> u64 {
        self.held.len() as u64
    }

    pub fn cached_tokens(&self) -> u64 {
        self.cached_blocks() * self.block_size as u64
    }

    pub fn evictable_blocks(&self) -> u64 {
        self.nodes
            .iter()
            .filter(|(id, node)| **id != ROOT && node.subtree_locks == 0)
            .map(|(_, node)| node.blocks.len() as u64)
            .sum()
    }

    pub fn stats(&self) -> Stats {
        self.stats
    }

    pub fn hit_rate(&self) -> f64 {
        if self.stats.query_tokens == 0 {
            0.0
        } else {
            self.stats.hit_tokens as f64 / self.stats.query_tokens as f64
        }
    }

    fn prefix_of(&self, id: NodeId) -> Vec<u32> {
        let mut edges = Vec::new();
        let mut at = id;
        while at != ROOT {
            let node = self.node(at);
            edges.push(&node.edge);
            at = node.parent;
        }
        let mut prefix = Vec::with_capacity(self.node(id).depth);
        for edge in edges.iter().rev() {
            prefix.extend_from_slice(edge);
        }
        prefix
    }

    /// Every node but the root, least recently used first; a path used by one call, shortest first.
    pub fn snapshot(&self) -> Vec<NodeView> {
        let mut order: Vec<(u64, usize, NodeId)> =
            self.nodes.iter().filter(|(_, node)| !node.edge.is_empty()).map(|(id, node)| (node.last_use, node.depth, *id)).collect();
        order.sort_unstable();
        order
            .into_iter()
            .map(|(_, _, id)| {
                let node = self.node(id);
                NodeView { prefix: self.prefix_of(id), blocks: node.blocks.clone(), locks: node.own_locks, namespace: self.namespaces[node.ns].clone() }
            })
            .collect()
    }
}
