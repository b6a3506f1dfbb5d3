//! Maps keyed by a network's name and a key within that network, looked up with the
//! name as `&str`: the install path reads such maps for every route, and a `(String, K)`
//! key would make a String for each lookup (and compare names at every step of a search).
//! `PerNet` is hashed within a network; `ByNet` keeps the order of `(network, key)` for
//! what is made from it in order (the configuration's entries).

use ovr_tables::fasthash::FastMap;
use std::collections::BTreeMap;
use std::hash::Hash;

/// What a network's keys are kept in: hashed or ordered.
pub trait Keys: Default {
    type K;
    type V;
    fn get(&self, k: &Self::K) -> Option<&Self::V>;
    fn insert(&mut self, k: Self::K, v: Self::V) -> Option<Self::V>;
    fn remove(&mut self, k: &Self::K) -> Option<Self::V>;
    fn len(&self) -> usize;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<K: Hash + Eq, V> Keys for FastMap<K, V> {
    type K = K;
    type V = V;
    fn get(&self, k: &K) -> Option<&V> {
        FastMap::get(self, k)
    }
    fn insert(&mut self, k: K, v: V) -> Option<V> {
        FastMap::insert(self, k, v)
    }
    fn remove(&mut self, k: &K) -> Option<V> {
        FastMap::remove(self, k)
    }
    fn len(&self) -> usize {
        FastMap::len(self)
    }
}

impl<K: Ord, V> Keys for BTreeMap<K, V> {
    type K = K;
    type V = V;
    fn get(&self, k: &K) -> Option<&V> {
        BTreeMap::get(self, k)
    }
    fn insert(&mut self, k: K, v: V) -> Option<V> {
        BTreeMap::insert(self, k, v)
    }
    fn remove(&mut self, k: &K) -> Option<V> {
        BTreeMap::remove(self, k)
    }
    fn len(&self) -> usize {
        BTreeMap::len(self)
    }
}

/// A map of `M` per name (few names: a network's, a neighbor's), sorted by name; a name
/// with no key left goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Named<M>(BTreeMap<String, M>);

/// Hashed within a network.
pub type PerNet<K, V> = Named<FastMap<K, V>>;
/// A set of keys per network.
pub type PerNetSet<K> = PerNet<K, ()>;
/// Sorted by network, then key.
pub type ByNet<K, V> = Named<BTreeMap<K, V>>;

impl<M> Default for Named<M> {
    fn default() -> Self {
        Self(BTreeMap::new())
    }
}

impl<M: Keys> Named<M> {
    pub fn get(&self, name: &str, k: &M::K) -> Option<&M::V> {
        self.0.get(name)?.get(k)
    }

    pub fn contains(&self, name: &str, k: &M::K) -> bool {
        self.get(name, k).is_some()
    }

    pub fn insert(&mut self, name: &str, k: M::K, v: M::V) -> Option<M::V> {
        match self.0.get_mut(name) {
            Some(m) => m.insert(k, v),
            None => {
                let mut m = M::default();
                m.insert(k, v);
                self.0.insert(name.to_string(), m);
                None
            }
        }
    }

    pub fn remove(&mut self, name: &str, k: &M::K) -> Option<M::V> {
        let m = self.0.get_mut(name)?;
        let v = m.remove(k);
        if m.is_empty() {
            self.0.remove(name);
        }
        v
    }

    pub fn len(&self) -> usize {
        self.0.values().map(M::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl<K: Ord, V> ByNet<K, V> {
    /// Every entry, by network, then key.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &K, &V)> {
        self.0
            .iter()
            .flat_map(|(n, m)| m.iter().map(move |(k, v)| (n, k, v)))
    }

    pub fn values(&self) -> impl Iterator<Item = &V> {
        self.0.values().flat_map(BTreeMap::values)
    }

    pub fn retain(&mut self, mut keep: impl FnMut(&str, &K, &mut V) -> bool) {
        for (n, m) in &mut self.0 {
            m.retain(|k, v| keep(n, k, v));
        }
        self.0.retain(|_, m| !m.is_empty());
    }
}

impl<M: Keys> FromIterator<((String, M::K), M::V)> for Named<M> {
    fn from_iter<I: IntoIterator<Item = ((String, M::K), M::V)>>(it: I) -> Self {
        let mut s = Self::default();
        for ((name, k), v) in it {
            s.insert(&name, k, v);
        }
        s
    }
}

impl<K: Hash + Eq> FromIterator<(String, K)> for PerNetSet<K> {
    fn from_iter<I: IntoIterator<Item = (String, K)>>(it: I) -> Self {
        let mut s = Self::default();
        for (net, k) in it {
            s.insert(&net, k, ());
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_per_network_and_an_emptied_network_goes() {
        let mut m: PerNet<u32, &str> = PerNet::default();
        assert_eq!(m.insert("red", 1, "a"), None);
        assert_eq!(m.insert("red", 1, "b"), Some("a"));
        m.insert("blue", 1, "c");
        assert_eq!(
            (m.get("red", &1), m.get("blue", &1)),
            (Some(&"b"), Some(&"c"))
        );
        assert!(!m.contains("green", &1) && !m.contains("red", &2));
        assert_eq!(m.remove("red", &1), Some("b"));
        assert_eq!(m.remove("red", &1), None);
        assert!(!m.0.contains_key("red"));
        let s: PerNetSet<u8> = [("red".to_string(), 7)].into_iter().collect();
        assert!(s.contains("red", &7) && !s.contains("red", &8));
    }

    #[test]
    fn by_net_keeps_the_order_of_network_then_key() {
        let mut m: ByNet<u32, char> = ByNet::default();
        for (n, k, v) in [("red", 2, 'a'), ("blue", 9, 'b'), ("red", 1, 'c')] {
            assert_eq!(m.insert(n, k, v), None);
        }
        let all: Vec<_> = m.iter().map(|(n, k, v)| (n.as_str(), *k, *v)).collect();
        assert_eq!(all, [("blue", 9, 'b'), ("red", 1, 'c'), ("red", 2, 'a')]);
        assert_eq!(
            (m.len(), m.get("red", &2), m.contains("blue", &2)),
            (3, Some(&'a'), false)
        );
        m.retain(|n, _, _| n != "blue");
        assert_eq!(m.remove("red", &1), Some('c'));
        assert_eq!(m.remove("red", &2), Some('a'));
        assert!(m.is_empty());
    }
}
