//! The scaffolding every header view shares, declared once: the struct over a buffer,
//! `new_unchecked`, `into_inner` and the byte accessor the getters read through. Each
//! protocol file writes what differs: `new_checked` (its length rules) and its fields.

macro_rules! view {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone)]
        pub struct $name<T: AsRef<[u8]>> {
            buffer: T,
        }

        impl<T: AsRef<[u8]>> $name<T> {
            /// Wraps `buffer` without checking its length (getters may then panic on a
            /// short buffer): for buffers this crate or a checked view has sized.
            pub const fn new_unchecked(buffer: T) -> Self {
                Self { buffer }
            }

            pub fn into_inner(self) -> T {
                self.buffer
            }

            #[inline]
            fn b(&self) -> &[u8] {
                self.buffer.as_ref()
            }
        }
    };
}
