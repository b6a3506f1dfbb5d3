//! FastPath and describe() against the real pipeline.
