//! A real S3-compatible server for tests: `moto[server]` (tests/py/requirements.txt) started
//! from the checkers' Python on a free loopback port, with one bucket; its process group killed
//! on drop. Parts of a multipart upload may be as small as 512 bytes on it, so tests need not
//! write 5 MiB parts.
#![allow(dead_code)]

use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use object_store::ObjectStore;
use stowage::config::Config;

/// Credentials the tests use (moto accepts any).
pub const KEY_ID: &str = "stowage-test";
pub const SECRET: &str = "stowage-test-secret";

/// A running moto server with a bucket.
pub struct Moto {
    child: Option<Child>,
    pub port: u16,
    pub bucket: String,
}

impl Moto {
    /// Starts moto on a free port and creates `bucket`.
    pub async fn start(bucket: &str) -> Moto {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut moto = Moto {
            child: None,
            port,
            bucket: bucket.into(),
        };
        moto.up().await;
        moto
    }

    /// `http://127.0.0.1:PORT`
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The `storage.url` of a prefix in the bucket.
    pub fn url(&self, prefix: &str) -> String {
        format!("s3://{}/{prefix}", self.bucket)
    }

    /// Points `config` at `prefix` in the bucket (S3 keys; credentials come separately).
    pub fn configure(&self, config: &mut Config, prefix: &str) {
        config.storage.url = self.url(prefix);
        config.storage.s3_endpoint = self.endpoint();
        config.storage.s3_allow_http = true;
        config.storage.s3_region = "us-east-1".into();
    }

    /// The credentials as environment variables.
    pub fn aws_env() -> Vec<(String, String)> {
        vec![
            ("AWS_ACCESS_KEY_ID".into(), KEY_ID.into()),
            ("AWS_SECRET_ACCESS_KEY".into(), SECRET.into()),
        ]
    }

    /// The environment a `stowage` process needs for `prefix` in the bucket.
    pub fn process_env(&self, prefix: &str) -> Vec<(String, String)> {
        let mut env = Self::aws_env();
        env.extend([
            ("STOWAGE_STORAGE__URL".into(), self.url(prefix)),
            ("STOWAGE_STORAGE__S3_ENDPOINT".into(), self.endpoint()),
            ("STOWAGE_STORAGE__S3_ALLOW_HTTP".into(), "true".into()),
            ("STOWAGE_STORAGE__S3_REGION".into(), "us-east-1".into()),
        ]);
        env
    }

    /// The store stowage opens for `config` (with the test credentials).
    pub fn store(config: &Config) -> Arc<dyn ObjectStore> {
        stowage::store::s3::open(&config.storage, Self::aws_env()).unwrap()
    }

    /// The whole bucket, unprefixed, through stowage's own S3 opening.
    pub fn bucket_store(&self) -> Arc<dyn ObjectStore> {
        let mut config = Config::default();
        self.configure(&mut config, "");
        Self::store(&config)
    }

    /// Kills the server (its objects and buckets are gone with it).
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            super::process::kill_group(&mut child);
        }
    }

    /// Starts it again on the same port, with the bucket (empty).
    pub async fn up(&mut self) {
        assert!(self.child.is_none());
        let child = super::process::own_group(&mut Command::new(super::python()))
            .args(["-m", "moto.server", "-H", "127.0.0.1", "-p"])
            .arg(self.port.to_string())
            .env("S3_UPLOAD_PART_MIN_SIZE", "512")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("python with moto[server] (tests/py/requirements.txt)");
        self.child = Some(child);
        let http = reqwest::Client::new();
        let bucket_url = format!("{}/{}", self.endpoint(), self.bucket);
        let created = super::wait_for(Duration::from_secs(60), || async {
            http.put(&bucket_url)
                .send()
                .await
                .is_ok_and(|r| r.status().is_success())
        })
        .await;
        assert!(created, "moto did not come up on port {}", self.port);
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        self.kill();
    }
}
