//! Updates of the IPv6 trie: finding the node that holds a route, rewriting that node's
//! leaves, handing the new covering route down to its descendants' `default`, and moving
//! a node's block of children when it gains or loses one.

use super::{
    DIRECT, INLINE, LEAF_MASK, Lpm6, MAX_SKIP, NODE, Node, STRIDE, mask, slot, top_index, upto,
};

/// The bit of a node's route map for the route `r` (1-6) bits past the node's depth
/// whose next `r` bits are `b`: shorter routes take lower bits.
fn owned_bit(r: u32, b: u32) -> u32 {
    (1 << r) - 2 + b
}

/// The inverse of `owned_bit`.
fn split(bit: u32) -> (u32, u32) {
    let r = 31 - (bit + 2).leading_zeros();
    (r, bit + 2 - (1 << r))
}

/// The `skip` of a node standing for the `levels` levels from `depth` on `p`'s path.
fn skip_of(p: u128, depth: u32, levels: u32) -> u32 {
    if levels == 0 {
        return 0;
    }
    (levels << 24) | ((p << depth) >> (128 - levels * STRIDE)) as u32
}

/// Where a node that starts at `key`/`depth` and has `skip` sits.
fn skipped(key: u128, depth: u32, skip: u32) -> (u128, u32) {
    let levels = skip >> 24;
    if levels == 0 {
        return (key, depth);
    }
    let end = depth + levels * STRIDE;
    (key | (u128::from(skip & 0xff_ffff) << (128 - end)), end)
}

/// Where the child of the node at `key`/`depth` in slot `s`, with `skip`, sits.
fn below(key: u128, depth: u32, s: u32, skip: u32) -> (u128, u32) {
    let d = depth + STRIDE;
    skipped(key | (u128::from(s) << (128 - d)), d, skip)
}

/// How many levels a node created for the route `p/len` at `depth` skips: as many as
/// the route allows (it must end in the node's own stride).
fn levels_for(len: u32, depth: u32) -> u32 {
    ((len - depth - 1) / STRIDE).min(MAX_SKIP)
}

/// The `skip` of the first `levels` levels of `skip`.
fn cut(skip: u32, levels: u32) -> u32 {
    if levels == 0 {
        return 0;
    }
    let all = skip >> 24;
    (levels << 24) | ((skip & 0xff_ffff) >> ((all - levels) * STRIDE))
}

/// The slots a route `r` bits past a node's depth, with bits `b`, covers.
fn covered(r: u32, b: u32) -> u64 {
    let width = 1u32 << (STRIDE - r);
    (u64::MAX >> (64 - width)) << (b * width)
}

impl Lpm6 {
    /// Writes `value` (length << 24 | leaf) over the /16s of the route `p/len` (len ≤ 16)
    /// whose current route is no longer than it, or, with `only_own`, exactly as long.
    pub(super) fn paint_short(&mut self, p: u128, len: u8, value: u32, only_own: bool) {
        let first = top_index(p);
        for t in first..first + (1 << (DIRECT - u32::from(len))) {
            let depth = (self.short[t] >> 24) as u8;
            if depth == len || (!only_own && depth < len) {
                self.short[t] = value;
                let leaf = value & LEAF_MASK;
                match self.top[t] {
                    e if e & NODE != 0 => {
                        let i = e & !NODE;
                        let start = (t as u128) << (128 - DIRECT);
                        let (key, depth) = skipped(start, DIRECT, self.nodes[i as usize].skip);
                        self.set_default(i, key, depth, leaf)
                    }
                    _ => self.top[t] = leaf,
                }
            }
        }
    }

    pub(super) fn insert_long(&mut self, p: u128, len: u32) {
        let t = top_index(p);
        let (mut i, mut depth) = match self.top[t] {
            e if e & NODE != 0 => (e & !NODE, self.descend(e & !NODE, p, len, DIRECT)),
            leaf => {
                let levels = levels_for(len, DIRECT);
                let i = self.alloc_nodes(1);
                self.nodes[i as usize] = Node::empty(leaf, skip_of(p, DIRECT, levels));
                self.owned[i as usize] = 0;
                self.top[t] = NODE | i;
                (i, DIRECT + levels * STRIDE)
            }
        };
        while len > depth + STRIDE {
            let s = slot(p, depth);
            let d = depth + STRIDE;
            (i, depth) = match self.nodes[i as usize].child(s) {
                None => {
                    let levels = levels_for(len, d);
                    let skip = skip_of(p, d, levels);
                    (
                        self.add_child(i, p & mask(depth), depth, s, skip),
                        d + levels * STRIDE,
                    )
                }
                Some(c) => (c, self.descend(c, p, len, d)),
            };
        }
        let (r, b) = (len - depth, slot(p, depth) >> (STRIDE - (len - depth)));
        self.owned[i as usize] |= 1 << owned_bit(r, b);
        self.rebuild_leaves(i, p & mask(depth), depth);
        self.hand_down(i, p & mask(depth), depth, covered(r, b));
    }

    /// Enters node `c`, which starts at `depth`, on the way to the route `p/len`: keeps
    /// the levels it skips that the route passes through whole, on its path, and splits
    /// the node after them if there are others. Returns the depth `c` then sits at.
    fn descend(&mut self, c: u32, p: u128, len: u32, depth: u32) -> u32 {
        let skip = self.nodes[c as usize].skip;
        let levels = skip >> 24;
        let kept = (0..levels)
            .find(|j| {
                len <= depth + (j + 1) * STRIDE || skip_of(p, depth, j + 1) != cut(skip, j + 1)
            })
            .unwrap_or(levels);
        if kept < levels {
            self.split(c, kept);
        }
        depth + kept * STRIDE
    }

    /// Splits the skipping node `c` after its first `kept` skipped levels: `c` becomes an
    /// empty node there whose one child, in a new block, is what `c` was, skipping the
    /// levels below.
    fn split(&mut self, c: u32, kept: u32) {
        let old = self.nodes[c as usize];
        let levels = old.skip >> 24;
        let rest = levels - kept - 1;
        let bits = old.skip & 0xff_ffff;
        let s = (bits >> (rest * STRIDE)) & 63;
        let y = self.alloc_nodes(1);
        self.nodes[y as usize] = Node {
            skip: if rest == 0 {
                0
            } else {
                (rest << 24) | (bits & ((1 << (rest * STRIDE)) - 1))
            },
            ..old
        };
        self.owned[y as usize] = self.owned[c as usize];
        let mut x = Node::empty(old.default, cut(old.skip, kept));
        x.vector = 1 << s;
        x.base1 = y;
        self.nodes[c as usize] = x;
        self.owned[c as usize] = 0;
    }

    pub(super) fn remove_long(&mut self, p: u128, len: u32) {
        let t = top_index(p);
        // The route was in the RIB, so its path exists.
        let mut i = self.top[t] & !NODE;
        let mut path = [(0u32, 0u32); 20];
        let mut up = 0;
        let mut depth = DIRECT + (self.nodes[i as usize].skip >> 24) * STRIDE;
        while len > depth + STRIDE {
            let s = slot(p, depth);
            path[up] = (i, s);
            up += 1;
            i = self.nodes[i as usize]
                .child(s)
                .expect("an installed route's path exists");
            depth += STRIDE + (self.nodes[i as usize].skip >> 24) * STRIDE;
        }
        let (r, b) = (len - depth, slot(p, depth) >> (STRIDE - (len - depth)));
        self.owned[i as usize] &= !(1 << owned_bit(r, b));
        self.rebuild_leaves(i, p & mask(depth), depth);
        self.hand_down(i, p & mask(depth), depth, covered(r, b));
        // Drop the nodes left with neither routes nor children, bottom up. (A node that
        // holds no route has an inline leaf, so no leaves to free.)
        while self.owned[i as usize] == 0 && self.nodes[i as usize].vector == 0 {
            if up == 0 {
                self.free_nodes[1].push(i);
                self.top[t] = self.short[t] & LEAF_MASK;
                break;
            }
            up -= 1;
            let (parent, s) = path[up];
            self.remove_child(parent, s);
            i = parent;
        }
    }

    /// Each slot's leaf from the routes node `i` (at `depth`, under `key`) holds alone:
    /// the longest that covers the slot, 0 where none does.
    fn paint(&self, i: u32, key: u128, depth: u32) -> [u32; 64] {
        let mut v = [0u32; 64];
        let mut bits = self.owned[i as usize];
        while bits != 0 {
            let (r, b) = split(bits.trailing_zeros());
            bits &= bits - 1;
            let len = depth + r;
            let p = key | (u128::from(b) << (128 - len));
            let nh = self.rib[&(p, len as u8)];
            let width = 1 << (STRIDE - r);
            let first = b as usize * width;
            v[first..first + width].fill(nh.0 + 1);
        }
        v
    }

    /// Rewrites the leaves of node `i` from its routes: inline when they are a single
    /// next hop, otherwise in a block (the same one when their number stays).
    fn rebuild_leaves(&mut self, i: u32, key: u128, depth: u32) {
        let v = self.paint(i, key, depth);
        let old = self.nodes[i as usize];
        let old_n = old.leafvec.count_ones() as usize;
        let one = v.iter().copied().find(|l| *l != 0).unwrap_or(0);
        let (leafvec, base0) = if v.iter().all(|l| *l == 0 || *l == one) {
            let covered = (0..64).fold(0u64, |m, s| m | u64::from(v[s] != 0) << s);
            (covered, INLINE | one)
        } else {
            let leafvec = (1..64).fold(1u64, |m, s| m | u64::from(v[s] != v[s - 1]) << s);
            let n = leafvec.count_ones() as usize;
            let base0 = if old.base0 & INLINE == 0 && old_n == n {
                old.base0
            } else {
                self.alloc_leaves(n)
            };
            let mut k = base0 as usize;
            for (s, leaf) in v.iter().enumerate() {
                if leafvec >> s & 1 != 0 {
                    self.leaves[k] = *leaf;
                    k += 1;
                }
            }
            (leafvec, base0)
        };
        if old.base0 & INLINE == 0 && old.base0 != base0 {
            self.free_leaves[old_n].push(old.base0);
        }
        let node = &mut self.nodes[i as usize];
        node.leafvec = leafvec;
        node.base0 = base0;
    }

    /// Gives the children of node `i` in `slots` the default their slot now resolves to.
    fn hand_down(&mut self, i: u32, key: u128, depth: u32, slots: u64) {
        let n = self.nodes[i as usize];
        let mut kids = n.vector & slots;
        if kids == 0 {
            return;
        }
        let v = self.paint(i, key, depth);
        while kids != 0 {
            let s = kids.trailing_zeros();
            kids &= kids - 1;
            let leaf = match v[s as usize] {
                0 => n.default,
                l => l,
            };
            let c = n.child(s).expect("a set vector bit has a child");
            let (key, depth) = below(key, depth, s, self.nodes[c as usize].skip);
            self.set_default(c, key, depth, leaf);
        }
    }

    /// Sets the default of node `i` and, where it changed, of the descendants that
    /// inherit it. A node whose default is already `leaf` has a subtree that agrees.
    pub(super) fn set_default(&mut self, i: u32, key: u128, depth: u32, leaf: u32) {
        if self.nodes[i as usize].default != leaf {
            self.nodes[i as usize].default = leaf;
            self.hand_down(i, key, depth, u64::MAX);
        }
    }

    /// Gives node `i` (at `depth`, under `key`) a new child in slot `s` with `skip`,
    /// moving its block of children to one a node larger; returns the child.
    fn add_child(&mut self, i: u32, key: u128, depth: u32, s: u32, skip: u32) -> u32 {
        let n = self.nodes[i as usize];
        let count = n.vector.count_ones() as usize;
        let rank = (n.vector & (upto(s) >> 1)).count_ones() as usize;
        let default = match self.paint(i, key, depth)[s as usize] {
            0 => n.default,
            l => l,
        };
        let base = self.alloc_nodes(count + 1) as usize;
        let old = n.base1 as usize;
        for k in 0..count {
            let to = base + k + usize::from(k >= rank);
            self.nodes[to] = self.nodes[old + k];
            self.owned[to] = self.owned[old + k];
        }
        self.nodes[base + rank] = Node::empty(default, skip);
        self.owned[base + rank] = 0;
        if count > 0 {
            self.free_nodes[count].push(n.base1);
        }
        let node = &mut self.nodes[i as usize];
        node.vector |= 1 << s;
        node.base1 = base as u32;
        (base + rank) as u32
    }

    /// Removes the (empty) child in slot `s` of node `i`, moving the rest of its block of
    /// children to one a node smaller.
    fn remove_child(&mut self, i: u32, s: u32) {
        let n = self.nodes[i as usize];
        let count = n.vector.count_ones() as usize;
        let rank = (n.vector & (upto(s) >> 1)).count_ones() as usize;
        let old = n.base1 as usize;
        debug_assert_eq!(self.nodes[old + rank].base0, INLINE);
        let base = if count == 1 {
            0
        } else {
            let base = self.alloc_nodes(count - 1) as usize;
            for k in (0..count).filter(|k| *k != rank) {
                let to = base + k - usize::from(k > rank);
                self.nodes[to] = self.nodes[old + k];
                self.owned[to] = self.owned[old + k];
            }
            base
        };
        self.free_nodes[count].push(n.base1);
        let node = &mut self.nodes[i as usize];
        node.vector &= !(1 << s);
        node.base1 = base as u32;
    }

    fn alloc_nodes(&mut self, n: usize) -> u32 {
        if let Some(b) = self.free_nodes[n].pop() {
            return b;
        }
        let b = self.nodes.len();
        self.nodes.resize(b + n, Node::default());
        self.owned.resize(b + n, 0);
        b as u32
    }

    fn alloc_leaves(&mut self, n: usize) -> u32 {
        if let Some(b) = self.free_leaves[n].pop() {
            return b;
        }
        let b = self.leaves.len();
        self.leaves.resize(b + n, 0);
        b as u32
    }
}
