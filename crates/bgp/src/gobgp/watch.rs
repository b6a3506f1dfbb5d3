//! gobgpd's WatchEvent stream, decoded in place: each message's EVPN paths are read
//! straight from the gRPC buffer into [`Learnt`] (`fields`), not first into prost's
//! `WatchEventResponse` with its owned `Any`s. A custom tonic codec does it; the request
//! is still prost's.

use super::decode::{decode_parts, decode_withdrawn, malformed};
use super::fields::{AnyRef, Malformed, Value, anys, fields};
use super::{Change, Learnt, evpn_family, neighbor_of, refuse};
use crate::api;
use prost::bytes::Buf;
use tonic::Status;
use tonic::codec::{BufferSettings, Codec, DecodeBuf, Decoder};
use tonic_prost::ProstEncoder;

/// The EVPN paths of one encoded `WatchEventResponse` (none for a peer event), as
/// [`super::learnt`] makes them of prost's messages. A path whose NLRI or attributes
/// are malformed is refused alone (`Learnt::route`); a message that is not protobuf at
/// all is an error.
pub(super) fn decode_event(buf: &[u8]) -> Result<Vec<Learnt>, Malformed> {
    let mut out = Vec::new();
    for f in fields(buf) {
        match f? {
            // `oneof event`: a table event's paths (several occurrences merge) ...
            (3, Value::Bytes(table)) => {
                for f in fields(table) {
                    if let (2, Value::Bytes(path)) = f? {
                        out.extend(path_of(path)?);
                    }
                }
            }
            // ... replaced by a later peer event.
            (2, _) => out.clear(),
            _ => {}
        }
    }
    Ok(out)
}

/// One `Path`, if it is an EVPN one.
fn path_of(buf: &[u8]) -> Result<Option<Learnt>, Malformed> {
    let (mut nlri, mut withdrawn, mut family, mut neighbor) = (None, false, None, "");
    for f in fields(buf) {
        match f? {
            (1, Value::Bytes(b)) => nlri = Some(b),
            (5, Value::Varint(v)) => withdrawn = v != 0,
            (9, Value::Bytes(b)) => family = Some(b),
            (15, Value::Bytes(b)) => {
                neighbor =
                    core::str::from_utf8(b).map_err(|_| Malformed("a neighbor not UTF-8"))?;
            }
            _ => {}
        }
    }
    let Some(family) = family else {
        return Ok(None);
    };
    let (mut afi, mut safi) = (0, 0);
    for f in fields(family) {
        match f? {
            (1, Value::Varint(v)) => afi = v,
            (2, Value::Varint(v)) => safi = v,
            _ => {}
        }
    }
    let evpn = evpn_family();
    if (afi, safi) != (evpn.afi as u64, evpn.safi as u64) {
        return Ok(None);
    }
    let change = match nlri {
        Some(b) => AnyRef::parse(b).map_err(malformed).and_then(|nlri| {
            if withdrawn {
                decode_withdrawn(nlri)
            } else {
                decode_parts(nlri, anys(buf, 2)).map(Change::Announced)
            }
        }),
        None => refuse("unknown_route_type", "no NLRI"),
    };
    Ok(Some(Learnt {
        change,
        neighbor: neighbor_of(neighbor).to_string(),
    }))
}

/// The WatchEvent call's codec: prost's encoder for the request, [`decode_event`] for
/// the answers.
pub(super) struct WatchCodec;

impl Codec for WatchCodec {
    type Encode = api::WatchEventRequest;
    type Decode = Vec<Learnt>;
    type Encoder = ProstEncoder<api::WatchEventRequest>;
    type Decoder = WatchDecoder;

    fn encoder(&mut self) -> Self::Encoder {
        ProstEncoder::new(BufferSettings::default())
    }

    fn decoder(&mut self) -> Self::Decoder {
        WatchDecoder
    }
}

pub(super) struct WatchDecoder;

impl Decoder for WatchDecoder {
    type Item = Vec<Learnt>;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Vec<Learnt>>, Status> {
        let n = src.remaining();
        // The message is one contiguous buffer in practice; copied only if not.
        let paths = if src.chunk().len() >= n {
            let r = decode_event(&src.chunk()[..n]);
            src.advance(n);
            r
        } else {
            decode_event(&src.copy_to_bytes(n))
        };
        paths.map(Some).map_err(|e| Status::internal(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{imet, mac_ip, prefix};
    use super::super::{encode, learnt};
    use super::*;
    use api::watch_event_response::{Event, PeerEvent, TableEvent};
    use prost::Message;

    fn event(paths: Vec<api::Path>) -> api::WatchEventResponse {
        api::WatchEventResponse {
            event: Some(Event::Table(TableEvent { paths })),
        }
    }

    /// What the stream gave before: prost's message, then `learnt` per EVPN path.
    fn through_prost(e: &api::WatchEventResponse) -> Vec<Learnt> {
        let e = api::WatchEventResponse::decode(e.encode_to_vec().as_slice()).unwrap();
        match e.event {
            Some(Event::Table(t)) => t
                .paths
                .into_iter()
                .filter(|p| p.family.as_ref() == Some(&evpn_family()))
                .map(learnt)
                .collect(),
            _ => Vec::new(),
        }
    }

    #[test]
    fn the_stream_reads_what_prost_and_learnt_read() {
        let mut paths: Vec<api::Path> = [mac_ip(), imet(), prefix()].iter().map(encode).collect();
        paths[0].neighbor_ip = "192.0.2.9".into();
        paths[1].neighbor_ip = "<nil>".into();
        paths[2].is_withdraw = true;
        // Fields ovr does not read, and a path of another family (skipped).
        paths[0].uuid = vec![7; 16];
        paths[0].age = Some(prost_types::Timestamp {
            seconds: 5,
            nanos: 1,
        });
        let mut other = encode(&mac_ip());
        other.family = Some(api::Family { afi: 1, safi: 1 });
        paths.push(other);
        // A route GoBGP has that ovr refuses (no route target), refused alike.
        let mut refused = encode(&mac_ip());
        refused
            .pattrs
            .retain(|a| !a.type_url.ends_with("ExtendedCommunitiesAttribute"));
        paths.push(refused);
        let e = event(paths);
        let read = decode_event(&e.encode_to_vec()).unwrap();
        assert_eq!(read, through_prost(&e));
        assert_eq!(read.len(), 4);
        assert_eq!(read[0].neighbor, "192.0.2.9");
        assert_eq!(read[1].neighbor, "");
        assert_eq!(read[2].change, Ok(Change::Withdrawn(prefix().nlri.key())));
        assert_eq!(
            read[3].change.as_ref().unwrap_err().reason,
            "no_route_target"
        );
        // A peer event has no path; one after a table event replaces it (a oneof).
        let peer = api::WatchEventResponse {
            event: Some(Event::Peer(PeerEvent::default())),
        };
        assert_eq!(decode_event(&peer.encode_to_vec()), Ok(Vec::new()));
        let mut both = e.encode_to_vec();
        both.extend(peer.encode_to_vec());
        assert_eq!(decode_event(&both), Ok(Vec::new()));
    }

    #[test]
    fn a_malformed_attribute_refuses_its_path_and_a_cut_message_is_an_error() {
        let mut p = encode(&mac_ip());
        // An extended community that is not an `Any`.
        let i = p
            .pattrs
            .iter()
            .position(|a| a.type_url.ends_with("ExtendedCommunitiesAttribute"))
            .unwrap();
        p.pattrs[i].value = vec![0x0a, 0x05, 0x0a];
        let mut bytes = event(vec![p]).encode_to_vec();
        // A path whose NLRI is not an `Any` (a length past its end), in a second table
        // event (field 3) of one path (field 2).
        let wrap = |key: u8, body: &[u8]| {
            let mut v = vec![key];
            prost::encoding::encode_varint(body.len() as u64, &mut v);
            v.extend(body);
            v
        };
        let mut q = encode(&mac_ip());
        q.nlri = None;
        let mut path = q.encode_to_vec();
        path.extend([0x0a, 3, 0x0a, 0x05, 0x0a]);
        bytes.extend(wrap(0x1a, &wrap(0x12, &path)));
        let read = decode_event(&bytes).unwrap();
        assert_eq!(read.len(), 2);
        assert_eq!(read[0].change.as_ref().unwrap_err().reason, "malformed");
        assert_eq!(read[1].change.as_ref().unwrap_err().reason, "malformed");
        let whole = event(vec![encode(&mac_ip())]).encode_to_vec();
        for cut in 1..whole.len() {
            // Never a panic; a cut inside a path's bytes is caught by a length.
            let _ = decode_event(&whole[..cut]);
        }
        assert!(decode_event(&whole[..whole.len() - 1]).is_err());
    }

    #[test]
    fn a_withdrawal_is_read_by_its_key_whatever_its_attributes_say() {
        let mut p = encode(&mac_ip());
        p.is_withdraw = true;
        // Attributes a route would be refused for: a malformed community, no next hop.
        for a in &mut p.pattrs {
            if a.type_url.ends_with("ExtendedCommunitiesAttribute") {
                a.value = vec![0x0a, 0x05, 0x0a];
            }
        }
        p.pattrs
            .retain(|a| !a.type_url.ends_with("MpReachNlriAttribute"));
        let e = event(vec![p]);
        let read = decode_event(&e.encode_to_vec()).unwrap();
        assert_eq!(read, through_prost(&e));
        assert_eq!(read[0].change, Ok(Change::Withdrawn(mac_ip().nlri.key())));
        // Its NLRI is still read: one that is not EVPN's is refused.
        let mut q = encode(&mac_ip());
        q.is_withdraw = true;
        q.nlri.as_mut().unwrap().type_url = "type.googleapis.com/apipb.IPAddressPrefix".into();
        let read = decode_event(&event(vec![q]).encode_to_vec()).unwrap();
        assert_eq!(
            read[0].change.as_ref().unwrap_err().reason,
            "unknown_route_type"
        );
    }

    proptest::proptest! {
        /// Whatever gobgpd's stream holds, reading it never panics, and a byte changed
        /// in a real message gives paths or an error, never a panic either.
        #[test]
        fn any_bytes_are_read_without_a_panic(
            junk in proptest::collection::vec(proptest::num::u8::ANY, 0..512),
            at in 0usize..4096,
            byte in proptest::num::u8::ANY,
        ) {
            let _ = decode_event(&junk);
            let mut real = event(vec![encode(&mac_ip()), encode(&imet())]).encode_to_vec();
            let i = at % real.len();
            real[i] = byte;
            let _ = decode_event(&real);
        }
    }
}
