//! The pieces every JSON report is made of: times as milliseconds, numbers written as integers
//! when they are whole, a lock record and an overlap of two. Shared by the plain report
//! (`report`) and the kinds' part of it (`kinds_report`), so both write them alike.

use std::time::Duration;

use serde::ser::SerializeStruct;
use serde::{Serialize, Serializer};

use crate::checker::Overlap;
use crate::history::LockRecord;

/// Two holders of one resource at once, with both records.
#[derive(Serialize)]
pub(crate) struct JsonOverlap<'a> {
    resource: &'a str,
    overlap_ms: Ms,
    first: JsonRecord<'a>,
    second: JsonRecord<'a>,
}

/// One lock operation as the report writes it: a view of the [`LockRecord`], its fields in
/// their order, the times as [`Ms`] under `_ms` names (`invoked_ms`, `acquired_ms`, ...).
pub(crate) struct JsonRecord<'a>(&'a LockRecord);

impl<'a> From<&'a LockRecord> for JsonRecord<'a> {
    fn from(r: &'a LockRecord) -> JsonRecord<'a> {
        JsonRecord(r)
    }
}

impl Serialize for JsonRecord<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        // Every field named, so that a field added to the record must be given its place here.
        let LockRecord {
            client,
            resource,
            token,
            invoked,
            acquired,
            validity_end,
            released,
            fencing,
            error,
        } = self.0;
        let mut s = serializer.serialize_struct("JsonRecord", 9)?;
        s.serialize_field("client", client)?;
        s.serialize_field("resource", resource)?;
        s.serialize_field("token", token)?;
        s.serialize_field("invoked_ms", &Ms(*invoked))?;
        s.serialize_field("acquired_ms", &acquired.map(Ms))?;
        s.serialize_field("validity_end_ms", &validity_end.map(Ms))?;
        s.serialize_field("released_ms", &released.map(Ms))?;
        s.serialize_field("fencing", fencing)?;
        s.serialize_field("error", error)?;
        s.end()
    }
}

/// A duration as milliseconds, rounded to the microsecond.
pub(crate) struct Ms(pub(crate) Duration);

impl Serialize for Ms {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        Number((self.0.as_secs_f64() * 1e6).round() / 1e3).serialize(serializer)
    }
}

/// A number written as an integer when it is whole (`1500`, not `1500.0`), and as `null`
/// when it is not finite.
pub(crate) struct Number(pub(crate) f64);

/// Whole numbers below this magnitude convert to an integer exactly.
const EXACT_INTEGERS: f64 = 9_007_199_254_740_992.0; // 2^53

impl Serialize for Number {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let x = self.0;
        if !x.is_finite() {
            serializer.serialize_none()
        } else if x.fract() == 0.0 && x.abs() < EXACT_INTEGERS {
            // Exact: whole and within the range where every integer is an f64.
            serializer.serialize_i64(x as i64)
        } else {
            serializer.serialize_f64(x)
        }
    }
}

impl<'a> From<&'a Overlap> for JsonOverlap<'a> {
    fn from(v: &'a Overlap) -> JsonOverlap<'a> {
        JsonOverlap {
            resource: &v.resource,
            overlap_ms: Ms(v.overlap),
            first: JsonRecord::from(&v.first),
            second: JsonRecord::from(&v.second),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_whole_when_they_can_be_and_null_when_not_finite() {
        let json = |x: f64| serde_json::to_string(&Number(x)).unwrap();
        assert_eq!(json(1.0), "1");
        assert_eq!(json(0.0), "0");
        assert_eq!(json(1.5), "1.5");
        assert_eq!(json(2.0 / 3.0), "0.6666666666666666");
        assert_eq!(json(f64::NAN), "null");
        assert_eq!(json(f64::INFINITY), "null");
        let ms = |d: Duration| serde_json::to_string(&Ms(d)).unwrap();
        assert_eq!(ms(Duration::from_micros(1500)), "1.5");
        assert_eq!(ms(Duration::from_secs(30)), "30000");
        assert_eq!(ms(Duration::from_nanos(1_234_567_891)), "1234.568");
    }
}
