//! Protobuf fields read in place: a message's tags and values, borrowed from its buffer.
//!
//! prost decodes into owned messages, and each `google.protobuf.Any` GoBGP nests (a
//! path's NLRI, each attribute, each extended community) becomes a `String` and a
//! `Vec`: about twenty allocations per path, a quarter of ovrd's CPU while it learnt
//! 100,000 routes (bench/RESULTS.md). The few messages ovr reads on that path are walked
//! here instead, their `Any`s borrowed; the small leaf messages are still prost's.

use prost::encoding::{WireType, decode_key, decode_varint};

/// A field's value, borrowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Value<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
    /// A fixed-width value (ovr reads none of them).
    Fixed,
}

/// The fields of one message, in order; an `Err` ends the walk (the message is malformed).
pub(crate) struct Fields<'a> {
    buf: &'a [u8],
}

/// A message that is not valid protobuf.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed protobuf: {0}")]
pub(crate) struct Malformed(pub &'static str);

pub(crate) fn fields(buf: &[u8]) -> Fields<'_> {
    Fields { buf }
}

impl<'a> Fields<'a> {
    fn next_field(&mut self) -> Result<(u32, Value<'a>), Malformed> {
        let (tag, wire) = decode_key(&mut self.buf).map_err(|_| Malformed("field key"))?;
        let value = match wire {
            WireType::Varint => {
                Value::Varint(decode_varint(&mut self.buf).map_err(|_| Malformed("varint"))?)
            }
            WireType::LengthDelimited => {
                let len = decode_varint(&mut self.buf).map_err(|_| Malformed("length"))?;
                let len = usize::try_from(len).map_err(|_| Malformed("length"))?;
                if len > self.buf.len() {
                    return Err(Malformed("a length past the message's end"));
                }
                let (value, rest) = self.buf.split_at(len);
                self.buf = rest;
                Value::Bytes(value)
            }
            WireType::SixtyFourBit | WireType::ThirtyTwoBit => {
                let n = if wire == WireType::SixtyFourBit { 8 } else { 4 };
                self.buf = self
                    .buf
                    .get(n..)
                    .ok_or(Malformed("a fixed value cut short"))?;
                Value::Fixed
            }
            WireType::StartGroup | WireType::EndGroup => return Err(Malformed("a group")),
        };
        Ok((tag, value))
    }
}

impl<'a> Iterator for Fields<'a> {
    type Item = Result<(u32, Value<'a>), Malformed>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.buf.is_empty() {
            return None;
        }
        let r = self.next_field();
        if r.is_err() {
            // Nothing after a malformed field can be read.
            self.buf = &[];
        }
        Some(r)
    }
}

/// A `google.protobuf.Any`, borrowed: the type's URL and the encoded message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct AnyRef<'a> {
    pub type_url: &'a str,
    pub value: &'a [u8],
}

impl<'a> From<&'a prost_types::Any> for AnyRef<'a> {
    fn from(a: &'a prost_types::Any) -> Self {
        Self {
            type_url: &a.type_url,
            value: &a.value,
        }
    }
}

impl<'a> AnyRef<'a> {
    /// Reads an encoded `Any` (as prost would: the last of a repeated field wins).
    pub fn parse(buf: &'a [u8]) -> Result<Self, Malformed> {
        let mut a = Self::default();
        for f in fields(buf) {
            match f? {
                (1, Value::Bytes(b)) => {
                    a.type_url =
                        core::str::from_utf8(b).map_err(|_| Malformed("a type URL not UTF-8"))?;
                }
                (2, Value::Bytes(b)) => a.value = b,
                _ => {}
            }
        }
        Ok(a)
    }
}

/// The `Any`s of repeated field `tag` of message `buf`, in order.
pub(crate) fn anys(buf: &[u8], tag: u32) -> impl Iterator<Item = Result<AnyRef<'_>, Malformed>> {
    fields(buf).filter_map(move |f| match f {
        Ok((t, Value::Bytes(b))) if t == tag => Some(AnyRef::parse(b)),
        Ok(_) => None,
        Err(e) => Some(Err(e)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    #[test]
    fn fields_are_read_in_place_and_a_cut_message_is_malformed() {
        let a = prost_types::Any {
            type_url: "type.googleapis.com/apipb.NextHopAttribute".into(),
            value: vec![1, 2, 3],
        };
        let buf = a.encode_to_vec();
        assert_eq!(AnyRef::parse(&buf), Ok(AnyRef::from(&a)));
        // Cut inside a field: malformed; between the two: the first alone.
        let between = 2 + a.type_url.len();
        for cut in (1..buf.len()).filter(|c| *c != between) {
            assert!(AnyRef::parse(&buf[..cut]).is_err(), "cut at {cut}");
        }
        let first = AnyRef::parse(&buf[..between]).unwrap();
        assert_eq!((first.type_url, first.value), (&a.type_url[..], &[][..]));
        // A varint, a fixed64 and a fixed32 are skipped over; a group is refused.
        let mut mixed = vec![
            0x08, 0x96, 0x01, 0x11, 0, 0, 0, 0, 0, 0, 0, 0, 0x1d, 0, 0, 0, 0,
        ];
        mixed.extend(&buf[..]);
        let read: Vec<_> = fields(&mixed).collect::<Result<_, _>>().unwrap();
        assert_eq!(read[0], (1, Value::Varint(150)));
        assert_eq!(read[1], (2, Value::Fixed));
        assert_eq!(read[2], (3, Value::Fixed));
        assert!(fields(&[0x0b]).next().unwrap().is_err());
    }
}
