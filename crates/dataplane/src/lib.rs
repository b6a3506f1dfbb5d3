//! ovr forwarding nodes.
