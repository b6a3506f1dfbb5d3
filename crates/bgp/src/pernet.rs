//! A map keyed by a network's name and a key within that network, looked up with the
//! name as `&str`: the install path reads such maps for every route, and a `(String, K)`
//! key would make a String for each lookup.

use ovr_tables::fasthash::FastMap;
use std::collections::HashMap;
use std::hash::Hash;

#[derive(Debug, Clone)]
pub struct PerNet<K, V>(HashMap<String, FastMap<K, V>>);

/// A set of keys per network.
pub type PerNetSet<K> = PerNet<K, ()>;

impl<K, V> Default for PerNet<K, V> {
    fn default() -> Self {
        Self(HashMap::new())
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
}
