//! Maps keyed by a network's name and a key within that network, looked up with the
//! name as `&str`: the install path reads such maps for every route, and a `(String, K)`
//! key would make a String for each lookup (and compare names at every step of a search).
//! `PerNet` is hashed; `ByNet` keeps the order of `(network, key)` for what is made from
//! it in order (the configuration's entries).

use ovr_tables::fasthash::FastMap;
use std::collections::BTreeMap;
use std::hash::Hash;

#[derive(Debug, Clone)]
pub struct PerNet<K, V>(FastMap<String, FastMap<K, V>>);

/// A set of keys per network.
pub type PerNetSet<K> = PerNet<K, ()>;

impl<K, V> Default for PerNet<K, V> {
    fn default() -> Self {
        Self(FastMap::default())
    }
}

impl<K: Hash + Eq, V> PerNet<K, V> {
    pub fn get(&self, net: &str, k: &K) -> Option<&V> {
        self.0.get(net)?.get(k)
    }

    pub fn contains(&self, net: &str, k: &K) -> bool {
        self.get(net, k).is_some()
    }

    pub fn insert(&mut self, net: &str, k: K, v: V) -> Option<V> {
        match self.0.get_mut(net) {
            Some(m) => m.insert(k, v),
            None => {
                let mut m = FastMap::default();
                m.insert(k, v);
                self.0.insert(net.to_string(), m);
                None
            }
        }
    }

    pub fn remove(&mut self, net: &str, k: &K) -> Option<V> {
        let m = self.0.get_mut(net)?;
        let v = m.remove(k);
        if m.is_empty() {
            self.0.remove(net);
        }
        v
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

/// Sorted by network, then key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ByNet<K, V>(BTreeMap<String, BTreeMap<K, V>>);

impl<K, V> Default for ByNet<K, V> {
    fn default() -> Self {
        Self(BTreeMap::new())
    }
}

impl<K: Ord, V> ByNet<K, V> {
    pub fn get(&self, net: &str, k: &K) -> Option<&V> {
        self.0.get(net)?.get(k)
    }

    pub fn contains(&self, net: &str, k: &K) -> bool {
        self.get(net, k).is_some()
    }

    pub fn insert(&mut self, net: &str, k: K, v: V) -> Option<V> {
        match self.0.get_mut(net) {
            Some(m) => m.insert(k, v),
            None => {
                self.0.insert(net.to_string(), BTreeMap::from([(k, v)]));
                None
            }
        }
    }

    pub fn remove(&mut self, net: &str, k: &K) -> Option<V> {
        let m = self.0.get_mut(net)?;
        let v = m.remove(k);
        if m.is_empty() {
            self.0.remove(net);
        }
        v
    }

    /// Every entry, by network, then key.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &K, &V)> {
        self.0
            .iter()
            .flat_map(|(n, m)| m.iter().map(move |(k, v)| (n, k, v)))
    }

    pub fn values(&self) -> impl Iterator<Item = &V> {
        self.0.values().flat_map(BTreeMap::values)
    }

    pub fn len(&self) -> usize {
        self.0.values().map(BTreeMap::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn retain(&mut self, mut keep: impl FnMut(&str, &K, &mut V) -> bool) {
        for (n, m) in &mut self.0 {
            m.retain(|k, v| keep(n, k, v));
        }
        self.0.retain(|_, m| !m.is_empty());
    }
}

impl<K: Ord, V> FromIterator<((String, K), V)> for ByNet<K, V> {
    fn from_iter<I: IntoIterator<Item = ((String, K), V)>>(it: I) -> Self {
        let mut s = Self::default();
        for ((net, k), v) in it {
            s.insert(&net, k, v);
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
