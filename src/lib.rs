//! quorlock
