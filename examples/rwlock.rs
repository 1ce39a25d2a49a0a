//! A read-write lock on your own masters: two readers at once, seen in an inspection, a writer
//! refused while they read, then the writer (with a fencing token) once they are gone.
//!
//! `cargo run --example rwlock` against `docker compose up`, or with `QUORLOCK_NODES` set to your
//! masters' URLs (comma-separated).

mod common;

use std::time::Duration;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let locks = common::connect().await?;
    let ttl = Duration::from_secs(10);
    let resource = "example:rwlock";

    let first = locks.acquire_read(resource, ttl).await?;
    let second = locks.acquire_read(resource, ttl).await?;
    println!("two readers hold {resource} at once");

    let seen = locks.inspect_rwlock(resource).await?;
    println!(
        "readers: {}, writer: {:?}, writers waiting: {}",
        seen.readers().len(),
        seen.writer(),
        seen.writers_waiting()
    );

    match locks.write(resource, ttl).try_acquire().await {
        Ok(_) => println!("unexpected: a writer got in beside the readers"),
        Err(err) => println!(
            "a writer is refused while they read (contended: {}): {err}",
            err.is_contended()
        ),
    }

    first.release().await?;
    second.release().await?;
    let writer = locks
        .write(resource, ttl)
        .fenced()
        .wait(Duration::from_secs(2))
        .acquire()
        .await?;
    println!(
        "the writer holds it alone, fencing token {:?}",
        writer.fencing_token()
    );
    writer.release().await?;
    locks.settle().await;
    Ok(())
}
