//! Checks the TTL-shift emulation of a clock jump against a real master.

use quorlock_chaos::{clock, Cluster};
use redis::AsyncCommands;

#[tokio::test]
async fn a_forward_shift_expires_short_keys_and_shortens_the_rest() {
    let cluster = Cluster::start(1).await.unwrap();
    let mut conn = cluster.client(0).await.unwrap();
    let _: () = conn.pset_ex("short", "1", 5_000).await.unwrap();
    let _: () = conn.pset_ex("long", "1", 600_000).await.unwrap();
    let _: () = conn.set("forever", "1").await.unwrap();

    let changed = clock::shift_ttls(&mut conn, 60_000).await.unwrap();
    assert_eq!(changed, 2);
    let short: Option<String> = conn.get("short").await.unwrap();
    assert_eq!(short, None);
    let long: i64 = conn.pttl("long").await.unwrap();
    assert!(long > 0 && long <= 540_000, "long has {long} ms left");
    let forever: i64 = conn.pttl("forever").await.unwrap();
    assert_eq!(forever, -1);

    // Backward: remaining TTL grows.
    clock::shift_ttls(&mut conn, -100_000).await.unwrap();
    let long: i64 = conn.pttl("long").await.unwrap();
    assert!(long > 540_000, "long has {long} ms left");
}
