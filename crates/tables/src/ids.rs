//! Typed indices into the tables, so that a next-hop id cannot be passed where an
//! interface id is meant.

macro_rules! table_id {
    ($(#[$doc:meta] $name:ident;)+) => {$(
        #[$doc]
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(pub u32);

        impl core::fmt::Display for $name {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                write!(f, "{}", self.0)
            }
        }
    )+};
}

table_id! {
    /// Index of a next hop in the next-hop table.
    NextHopId;
    /// Index of an interface (the vRouter's "vif").
    InterfaceId;
    /// Index of a VRF, i.e. of a virtual network's routing and bridging instance.
    VrfId;
}
