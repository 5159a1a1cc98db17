//! The CLI on `s3://` URLs against a real S3-compatible server: moto's `moto_server`,
//! started here on 127.0.0.1 and stopped by its PID (also when a test panics).
//!
//! Runs only where `ADVCALC_MOTO` names a `moto_server` executable (a venv with
//! `moto[s3]==5.2.5 flask flask-cors`); otherwise each test prints why it is skipped and
//! passes. See docs/object-storage-wip.md.
#![cfg(feature = "cloud")]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const BUCKET: &str = "advcalc-test";
const AUTHORIZATION: &str = "AWS4-HMAC-SHA256 Credential=testing/20260101/us-east-1/s3/aws4_request, \
     SignedHeaders=host, Signature=0";

/// A running `moto_server`, killed (by its PID) and reaped on drop.
struct Moto {
    child: Child,
    port: u16,
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Start `moto_server` on a free port of 127.0.0.1 and wait until it answers; `None` (with
/// the reason printed) when `ADVCALC_MOTO` is not set.
fn moto() -> Option<Moto> {
    let Some(exe) = std::env::var_os("ADVCALC_MOTO") else {
        eprintln!("skipped: ADVCALC_MOTO (the path of a moto_server executable) is not set");
        return None;
    };
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = Command::new(&exe)
        .args(["-H", "127.0.0.1", "-p", &port.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", Path::new(&exe).display()));
    let mut server = Moto { child, port };
    let start = Instant::now();
    loop {
        if TcpStream::connect(("127.0.0.1", port)).is_ok() {
            break;
        }
        if let Some(status) = server.child.try_wait().unwrap() {
            panic!("moto_server exited before it listened: {status}");
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "moto_server did not listen within 60 s"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let (status, body) = server.request("PUT", &format!("/{BUCKET}"), &[]);
    assert_eq!(
        status,
        200,
        "create the bucket: {}",
        String::from_utf8_lossy(&body)
    );
    Some(server)
}

impl Moto {
    /// One plain HTTP/1.1 request as the `testing` key (moto does not check signatures, but
    /// refuses an anonymous GET of what a signed PUT wrote): the status and body.
    fn request(&mut self, method: &str, path: &str, body: &[u8]) -> (u16, Vec<u8>) {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(60)))
            .unwrap();
        write!(
            stream,
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Length: {}\r\n\
             Authorization: {AUTHORIZATION}\r\nConnection: close\r\n\r\n",
            self.port,
            body.len()
        )
        .unwrap();
        stream.write_all(body).unwrap();
        let mut response = Vec::new();
        stream.read_to_end(&mut response).unwrap();
        let split = response
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .expect("an HTTP response");
        let head = String::from_utf8_lossy(&response[..split]).to_ascii_lowercase();
        let status: u16 = head.split(' ').nth(1).unwrap().parse().unwrap();
        let mut rest = response[split + 4..].to_vec();
        if head.contains("transfer-encoding: chunked") {
            rest = dechunk(&rest);
        }
        (status, rest)
    }

    fn put(&mut self, key: &str, body: &[u8]) {
        let (status, _) = self.request("PUT", &format!("/{BUCKET}/{key}"), body);
        assert_eq!(status, 200, "PUT {key}");
    }

    /// The object's bytes, or `None` when there is none.
    fn get(&mut self, key: &str) -> Option<Vec<u8>> {
        match self.request("GET", &format!("/{BUCKET}/{key}"), &[]) {
            (200, body) => Some(body),
            (404, _) => None,
            (status, body) => panic!("GET {key}: {status} {}", String::from_utf8_lossy(&body)),
        }
    }

    /// `advcalc ARGS` with the environment that points object_store at this server.
    fn advcalc(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_advcalc"))
            .args(args)
            .env_remove("AWS_PROFILE")
            .env_remove("AWS_SESSION_TOKEN")
            .env_remove("AWS_ENDPOINT_URL_S3")
            .env(
                "AWS_ENDPOINT_URL",
                format!("http://127.0.0.1:{}", self.port),
            )
            .env("AWS_ALLOW_HTTP", "true")
            .env("AWS_ACCESS_KEY_ID", "testing")
            .env("AWS_SECRET_ACCESS_KEY", "testing")
            .env("AWS_REGION", "us-east-1")
            .output()
            .unwrap()
    }
}

fn dechunk(mut body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let eol = body.windows(2).position(|w| w == b"\r\n").unwrap();
        let size_text = String::from_utf8_lossy(&body[..eol]);
        let size = usize::from_str_radix(size_text.split(';').next().unwrap().trim(), 16).unwrap();
        if size == 0 {
            return out;
        }
        out.extend_from_slice(&body[eol + 2..eol + 2 + size]);
        body = &body[eol + 2 + size + 2..];
    }
}

fn url(key: &str) -> String {
    format!("s3://{BUCKET}/{key}")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn demo() -> Vec<u8> {
    std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/demo.parquet")).unwrap()
}

/// A Parquet file's schema fields and decoded columns (not its key-value metadata, whose
/// `advcalc.input` names IN).
fn decoded(bytes: Vec<u8>) -> (Vec<arrow_schema::FieldRef>, Vec<arrow_array::RecordBatch>) {
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    let reader = ParquetRecordBatchReaderBuilder::try_new(bytes::Bytes::from(bytes))
        .unwrap()
        .build()
        .unwrap();
    let batches: Vec<_> = reader.map(Result::unwrap).collect();
    let fields = batches[0].schema().fields().iter().cloned().collect();
    let batches = batches
        .into_iter()
        .map(|b| {
            let plain = std::sync::Arc::new(arrow_schema::Schema::new(b.schema().fields().clone()));
            b.with_schema(plain).unwrap()
        })
        .collect();
    (fields, batches)
}

#[test]
fn run_reads_and_writes_s3_as_it_does_local_files() {
    let Some(mut s3) = moto() else { return };
    s3.put("demo.parquet", &demo());

    let out = s3.advcalc(&[
        "run",
        "-e",
        "grpo",
        &url("demo.parquet"),
        &url("out.parquet"),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let dir = tempfile::tempdir().unwrap();
    let local = dir.path().join("local.parquet");
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/demo.parquet");
    let out = s3.advcalc(&[
        "run",
        "-e",
        "grpo",
        fixture.to_str().unwrap(),
        local.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let remote = s3.get("out.parquet").expect("OUT was written");
    assert_eq!(
        decoded(remote.clone()),
        decoded(std::fs::read(&local).unwrap())
    );

    // inspect on IN and on OUT, the URL named
    for key in ["demo.parquet", "out.parquet"] {
        let out = s3.advcalc(&["inspect", &url(key)]);
        assert!(out.status.success(), "{}", stderr(&out));
        assert!(String::from_utf8_lossy(&out.stdout).contains(&url(key)));
    }

    // compare and report read an object IN too
    let out = s3.advcalc(&["compare", "-e", "grpo", "-e", "rloo", &url("demo.parquet")]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains(&url("demo.parquet")));
    let report = dir.path().join("report.html");
    let out = s3.advcalc(&[
        "report",
        "-e",
        "grpo",
        &url("demo.parquet"),
        "-o",
        report.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(report.is_file());

    // an existing OUT without --force: a usage error, OUT as it was
    let out = s3.advcalc(&[
        "run",
        "-e",
        "rloo",
        &url("demo.parquet"),
        &url("out.parquet"),
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("already exists"), "{}", stderr(&out));
    assert!(stderr(&out).contains("--force"), "{}", stderr(&out));
    assert_eq!(s3.get("out.parquet").unwrap(), remote);
    // with --force it is replaced
    let out = s3.advcalc(&[
        "run",
        "-e",
        "rloo",
        "--force",
        &url("demo.parquet"),
        &url("out.parquet"),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_ne!(s3.get("out.parquet").unwrap(), remote);

    // an Arrow IPC OUT is exported from the finished result, then put
    let out = s3.advcalc(&["run", "-e", "grpo", &url("demo.parquet"), &url("out.arrow")]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(&s3.get("out.arrow").unwrap()[..6], b"ARROW1");
}

#[test]
fn a_missing_object_is_a_data_error_naming_it_and_nothing_is_written() {
    let Some(mut s3) = moto() else { return };
    let out = s3.advcalc(&[
        "run",
        "-e",
        "grpo",
        &url("nope.parquet"),
        &url("never.parquet"),
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&url("nope.parquet")),
        "{}",
        stderr(&out)
    );
    assert!(stderr(&out).contains("no such object"), "{}", stderr(&out));
    assert_eq!(s3.get("never.parquet"), None);

    let out = s3.advcalc(&["inspect", &url("nope.parquet")]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&url("nope.parquet")),
        "{}",
        stderr(&out)
    );

    // IN that is not Parquet: a data error naming the URL, nothing at OUT
    s3.put("junk.parquet", b"not parquet at all");
    let out = s3.advcalc(&[
        "run",
        "-e",
        "grpo",
        &url("junk.parquet"),
        &url("never.parquet"),
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&url("junk.parquet")),
        "{}",
        stderr(&out)
    );
    assert_eq!(s3.get("never.parquet"), None);

    // a bucket, not an object: a usage error
    let out = s3.advcalc(&["inspect", &format!("s3://{BUCKET}/")]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}
