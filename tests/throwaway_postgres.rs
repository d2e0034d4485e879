//! The throwaway PostgreSQL cluster tests and benchmarks use: it starts,
//! takes a password, stops and starts again with its data, survives a
//! kill -9, and leaves nothing behind.

mod common;

#[test]
fn starts_stops_restarts_and_survives_a_kill() {
    let Some(mut pg) = common::postgres::start() else {
        return;
    };
    let url = pg.url();
    let mut client = postgres::Client::connect(&url, postgres::NoTls).expect("connect");
    client
        .batch_execute("CREATE TABLE kept (n INT); INSERT INTO kept VALUES (7)")
        .expect("write");
    let wrong = url.replace(pg.password(), "wrong");
    assert!(
        postgres::Client::connect(&wrong, postgres::NoTls).is_err(),
        "a wrong password is refused"
    );
    drop(client);

    pg.stop().expect("stop");
    assert!(!pg.is_running());
    assert!(
        postgres::Client::connect(&url, postgres::NoTls).is_err(),
        "stopped"
    );
    pg.start_again().expect("start again");
    let mut client = postgres::Client::connect(&url, postgres::NoTls).expect("reconnect");
    let n: i32 = client
        .query_one("SELECT n FROM kept", &[])
        .expect("read")
        .get(0);
    assert_eq!(n, 7);

    pg.kill().expect("kill");
    pg.start_again().expect("start after kill");
    let mut client = postgres::Client::connect(&url, postgres::NoTls).expect("reconnect");
    let n: i32 = client
        .query_one("SELECT n FROM kept", &[])
        .expect("read")
        .get(0);
    assert_eq!(n, 7, "a committed row survives kill -9");

    let other = pg.create_database("other").expect("create database");
    postgres::Client::connect(&other, postgres::NoTls).expect("connect to the new database");
}
