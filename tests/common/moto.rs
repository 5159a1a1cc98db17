//! A real S3-compatible server for the `cloud` tests: moto's `moto_server`, started on a
//! free port of 127.0.0.1 and stopped by its PID (also when a test panics), with plain
//! HTTP helpers to put and get objects behind advcalc's back.
//!
//! `ADVCALC_MOTO` names the `moto_server` executable (a venv with
//! `moto[s3]==5.2.5 flask flask-cors`; `scripts/test` makes one). Without it a test prints
//! why it is skipped and passes, unless `ADVCALC_REQUIRE_MOTO` is set (as `scripts/test`
//! does), so the README's test command cannot skip them silently.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub const BUCKET: &str = "advcalc-test";
const AUTHORIZATION: &str = "AWS4-HMAC-SHA256 Credential=testing/20260101/us-east-1/s3/aws4_request, \
     SignedHeaders=host, Signature=0";

/// A running `moto_server`, killed (by its PID) and reaped on drop.
pub struct Moto {
    child: Child,
    pub port: u16,
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Start `moto_server` on a free port of 127.0.0.1 and wait until it answers; `None` (with
/// the reason printed) when `ADVCALC_MOTO` is not set.
pub fn moto() -> Option<Moto> {
    let Some(exe) = std::env::var_os("ADVCALC_MOTO") else {
        assert!(
            std::env::var_os("ADVCALC_REQUIRE_MOTO").is_none(),
            "ADVCALC_REQUIRE_MOTO is set but ADVCALC_MOTO (the moto_server executable) is not"
        );
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
    // ready once it creates the bucket: a connection refused, or reset while the server is
    // still starting up, is retried until the deadline
    let start = Instant::now();
    loop {
        match server.try_request("PUT", &format!("/{BUCKET}"), &[]) {
            Ok((status, body)) => {
                // a retried create after one that took effect: the bucket is ours already
                let owned = String::from_utf8_lossy(&body).contains("BucketAlreadyOwnedByYou");
                assert!(
                    status == 200 || owned,
                    "create the bucket: {status} {}",
                    String::from_utf8_lossy(&body)
                );
                break;
            }
            Err(e) => {
                if let Some(status) = server.child.try_wait().unwrap() {
                    panic!("moto_server exited before it answered: {status}");
                }
                assert!(
                    start.elapsed() < Duration::from_secs(60),
                    "moto_server did not answer within 60 s: {e}"
                );
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
    Some(server)
}

impl Moto {
    /// One plain HTTP/1.1 request as the `testing` key (moto does not check signatures, but
    /// refuses an anonymous GET of what a signed PUT wrote): the status and body.
    pub fn request(&mut self, method: &str, path: &str, body: &[u8]) -> (u16, Vec<u8>) {
        self.try_request(method, path, body)
            .unwrap_or_else(|e| panic!("{method} {path}: {e}"))
    }

    /// [`Moto::request`], with a failed connection as an error.
    fn try_request(
        &mut self,
        method: &str,
        path: &str,
        body: &[u8],
    ) -> std::io::Result<(u16, Vec<u8>)> {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port))?;
        stream.set_read_timeout(Some(Duration::from_secs(60)))?;
        write!(
            stream,
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Length: {}\r\n\
             Authorization: {AUTHORIZATION}\r\nConnection: close\r\n\r\n",
            self.port,
            body.len()
        )?;
        stream.write_all(body)?;
        let mut response = Vec::new();
        stream.read_to_end(&mut response)?;
        let split = response
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .ok_or_else(|| {
                std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "no HTTP response")
            })?;
        let head = String::from_utf8_lossy(&response[..split]).to_ascii_lowercase();
        let status: u16 = head.split(' ').nth(1).unwrap().parse().unwrap();
        let mut rest = response[split + 4..].to_vec();
        if head.contains("transfer-encoding: chunked") {
            rest = dechunk(&rest);
        }
        Ok((status, rest))
    }

    pub fn put(&mut self, key: &str, body: &[u8]) {
        let (status, _) = self.request("PUT", &format!("/{BUCKET}/{key}"), body);
        assert_eq!(status, 200, "PUT {key}");
    }

    /// The object's bytes, or `None` when there is none.
    pub fn get(&mut self, key: &str) -> Option<Vec<u8>> {
        match self.request("GET", &format!("/{BUCKET}/{key}"), &[]) {
            (200, body) => Some(body),
            (404, _) => None,
            (status, body) => panic!("GET {key}: {status} {}", String::from_utf8_lossy(&body)),
        }
    }

    /// `advcalc` with the environment that points object_store at this server (and no other
    /// AWS settings of the caller's), for a test to add arguments to.
    pub fn command(&self) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_advcalc"));
        for (key, value) in self.env() {
            command.env(key, value);
        }
        command
            .env_remove("AWS_PROFILE")
            .env_remove("AWS_SESSION_TOKEN")
            .env_remove("AWS_ENDPOINT_URL_S3");
        command
    }

    /// The variables that point a client at this server.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            (
                "AWS_ENDPOINT_URL",
                format!("http://127.0.0.1:{}", self.port),
            ),
            ("AWS_ALLOW_HTTP", "true".into()),
            ("AWS_ACCESS_KEY_ID", "testing".into()),
            ("AWS_SECRET_ACCESS_KEY", "testing".into()),
            ("AWS_REGION", "us-east-1".into()),
        ]
    }

    /// `advcalc run -e grpo` from the key `input` to the key `output` of the test bucket.
    pub fn grpo(&self, input: &str, output: &str) -> Output {
        self.advcalc(&["run", "-e", "grpo", &url(input), &url(output)])
    }

    /// `advcalc run -e grpo --resume` from the prefix `input` to the prefix `output`.
    pub fn resume(&self, input: &str, output: &str) -> Output {
        self.command()
            .args(resume_args(input, output))
            .output()
            .unwrap()
    }

    /// `advcalc ARGS` run to completion against this server.
    pub fn advcalc(&self, args: &[&str]) -> Output {
        self.command().args(args).output().unwrap()
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

/// The arguments of `run -e grpo --resume` from the prefix `input` to the prefix `output`.
pub fn resume_args(input: &str, output: &str) -> [String; 6] {
    ["run", "-e", "grpo", "--resume"]
        .map(String::from)
        .into_iter()
        .chain([url(input), url(output)])
        .collect::<Vec<_>>()
        .try_into()
        .unwrap()
}

/// `out` succeeded and said it kept `kept` outputs.
pub fn assert_kept(out: &Output, kept: usize) {
    let err = stderr(out);
    assert!(out.status.success(), "{err}");
    assert!(err.contains(&format!("({kept} kept by --resume)")), "{err}");
}

pub fn url(key: &str) -> String {
    format!("s3://{BUCKET}/{key}")
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

pub fn demo() -> Vec<u8> {
    std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/demo.parquet")).unwrap()
}

/// A Parquet file's schema fields and decoded columns (not its key-value metadata, whose
/// `advcalc.input` names IN).
pub fn decoded(bytes: Vec<u8>) -> (Vec<arrow_schema::FieldRef>, Vec<arrow_array::RecordBatch>) {
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

impl Moto {
    /// The keys under `prefix` (one ListObjectsV2 page: the tests hold fewer than 1000).
    pub fn keys(&mut self, prefix: &str) -> Vec<String> {
        let (status, body) = self.request(
            "GET",
            &format!("/{BUCKET}?list-type=2&prefix={prefix}"),
            &[],
        );
        let body = String::from_utf8_lossy(&body).into_owned();
        assert_eq!(status, 200, "LIST {prefix}: {body}");
        body.split("<Key>")
            .skip(1)
            .filter_map(|s| s.split_once("</Key>").map(|(k, _)| k.to_string()))
            .collect()
    }
}
