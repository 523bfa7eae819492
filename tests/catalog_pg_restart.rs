//! PostgreSQL restarting under a running catalog (its own test binary: it restarts the
//! process's cluster): calls in flight fail, the next ones reconnect, and the secret cache
//! never serves a key revoked while its notification connection was down.

mod common;

use std::time::{Duration, Instant};

use stowage::catalog::{Catalog, Location, Role, SecretKind};

#[test]
fn a_postgres_restart_is_survived() {
    let location = Location::Postgres(common::pg::database_url());
    let server = Catalog::open_location(&location).unwrap();
    let team = server.create_team("t").unwrap();
    server.create_user(&team, None, "o", Role::Owner).unwrap();
    let (id, key) = server
        .create_secret(SecretKind::DataKey, &team, "o")
        .unwrap();
    assert!(server.auth_data_key(&key).unwrap().is_some(), "cached");

    common::pg::cluster().restart();

    // Each pooled connection may fail one call; then they are all back.
    let mut failures = 0;
    for _ in 0..20 {
        if server.find_team(&team).is_err() {
            failures += 1;
        }
    }
    assert!(failures <= 5, "{failures} failed calls");
    assert!(server.ping());

    // Another process revokes the key, perhaps before the server's listener is back: the
    // server must refuse it at once either way.
    let cli = Catalog::open_location(&location).unwrap();
    // The revocation answers once it is in force everywhere (the revocation lease).
    cli.revoke_secret(SecretKind::DataKey, &id)
        .unwrap()
        .wait_blocking();
    let deadline = Instant::now() + Duration::from_secs(5);
    let answer = loop {
        match server.auth_data_key(&key) {
            Ok(answer) => break answer,
            Err(e) if Instant::now() < deadline => {
                eprintln!("auth check failed while reconnecting: {e}");
            }
            Err(e) => panic!("the catalog did not come back: {e}"),
        }
    };
    assert_eq!(answer, None, "a revoked key was served from the cache");
}
