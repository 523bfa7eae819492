//! `stowage download`: fetch a table element to a file or stdout, with a progress line on
//! stderr (rows for text formats, bytes, rate) and a clear message for every error body.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Args;
use serde_json::json;

/// `download` flags.
#[derive(Debug, Args)]
pub struct DownloadArgs {
    /// Share URL of the element (`…/canvas/<canvasId>/element/<elementId>/new-canvas`).
    pub share_url: Option<String>,
    /// Canvas id (instead of a share URL).
    #[arg(long, requires = "element")]
    pub canvas: Option<String>,
    /// Element id (instead of a share URL).
    #[arg(long, requires = "canvas")]
    pub element: Option<String>,
    /// Data API key (or env STOWAGE_API_KEY).
    #[arg(long, env = "STOWAGE_API_KEY", hide_env_values = true)]
    pub key: String,
    /// Base URL of the service; default: taken from the share URL, else http://127.0.0.1:8080.
    #[arg(long)]
    pub base_url: Option<String>,
    /// json (default), ndjson, csv, arrow or parquet.
    #[arg(long)]
    pub format: Option<String>,
    /// Output file (default: stdout).
    #[arg(short = 'o', long)]
    pub output: Option<PathBuf>,
}

/// Where to send the request and what to ask for.
fn target(a: &DownloadArgs) -> Result<(String, String, String), String> {
    if let Some(url) = &a.share_url {
        let (base, rest) = url
            .split_once("/canvas/")
            .ok_or("a share URL looks like …/canvas/<canvasId>/element/<elementId>/new-canvas")?;
        let mut parts = rest.split('/');
        let canvas = parts
            .next()
            .filter(|s| !s.is_empty())
            .ok_or("share URL has no canvas id")?;
        let element = match (parts.next(), parts.next()) {
            (Some("element"), Some(e)) if !e.is_empty() => e,
            _ => return Err("share URL has no element id".into()),
        };
        let base = a
            .base_url
            .clone()
            .unwrap_or_else(|| base.trim_end_matches('/').to_string());
        return Ok((
            format!("{base}/api/data/table"),
            canvas.into(),
            element.into(),
        ));
    }
    match (&a.canvas, &a.element) {
        (Some(c), Some(e)) => {
            let base = a
                .base_url
                .clone()
                .unwrap_or_else(|| "http://127.0.0.1:8080".into());
            Ok((
                format!("{}/data/table", base.trim_end_matches('/')),
                c.clone(),
                e.clone(),
            ))
        }
        _ => Err("give a share URL, or --canvas and --element".into()),
    }
}

/// Runs the download.
pub fn run(args: DownloadArgs, json_errors: bool) -> ExitCode {
    let fail = |msg: &str| super::output::fail(json_errors, "download_failed", msg);
    let (url, canvas, element) = match target(&args) {
        Ok(t) => t,
        Err(e) => return fail(&e),
    };
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => return fail(&e.to_string()),
    };
    match rt.block_on(fetch(&args, &url, &canvas, &element)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(&e),
    }
}

async fn fetch(args: &DownloadArgs, url: &str, canvas: &str, element: &str) -> Result<(), String> {
    let mut body = json!({"canvasId": canvas, "elementId": element});
    if let Some(f) = &args.format {
        body["format"] = json!(f);
    }
    let client = reqwest::Client::new();
    let mut resp = client
        .post(url)
        .header("x-api-key", &args.key)
        .header("Content-Type", "application/json")
        .header("Accept-Encoding", "gzip")
        .body(body.to_string())
        .send()
        .await
        .map_err(|e| format!("cannot reach {url}: {e}"))?;
    let status = resp.status();
    if !status.is_success() {
        let text = resp.text().await.unwrap_or_default();
        let err: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
        let message = err["error"]["message"].as_str().unwrap_or(text.trim());
        let code = err["error"]["code"].as_str().unwrap_or("error");
        let hint = match status.as_u16() {
            401 => " (check the API key)",
            404 => " (check the canvas and element ids, and that the key belongs to their team)",
            _ => "",
        };
        return Err(format!("{} {code}: {message}{hint}", status.as_u16()));
    }
    let text_rows = !matches!(args.format.as_deref(), Some("arrow" | "parquet"));
    let mut out: Box<dyn Write> = match &args.output {
        Some(p) => Box::new(std::io::BufWriter::new(
            std::fs::File::create(p).map_err(|e| format!("cannot create {}: {e}", p.display()))?,
        )),
        None => Box::new(std::io::BufWriter::new(std::io::stdout().lock())),
    };
    let progress = Progress::new(text_rows);
    let mut bytes = 0u64;
    let mut lines = 0u64;
    let mut last = Instant::now();
    while let Some(chunk) = resp
        .chunk()
        .await
        .map_err(|e| format!("the download broke off after {bytes} bytes: {e}"))?
    {
        bytes += chunk.len() as u64;
        lines += chunk.iter().filter(|b| **b == b'\n').count() as u64;
        out.write_all(&chunk)
            .map_err(|e| format!("cannot write the output: {e}"))?;
        if last.elapsed() >= Duration::from_millis(200) {
            progress.show(bytes, lines, false);
            last = Instant::now();
        }
    }
    out.flush()
        .map_err(|e| format!("cannot write the output: {e}"))?;
    progress.show(bytes, lines, true);
    Ok(())
}

/// The stderr progress line.
struct Progress {
    started: Instant,
    tty: bool,
    text_rows: bool,
}

impl Progress {
    fn new(text_rows: bool) -> Self {
        Self {
            started: Instant::now(),
            tty: std::io::stderr().is_terminal(),
            text_rows,
        }
    }

    fn show(&self, bytes: u64, lines: u64, done: bool) {
        if !self.tty && !done {
            return;
        }
        let secs = self.started.elapsed().as_secs_f64().max(1e-3);
        let mib = bytes as f64 / (1 << 20) as f64;
        // JSON has a header and a footer line around one line per row; CSV a header line.
        let rows = if self.text_rows {
            format!("{} rows, ", lines.saturating_sub(2))
        } else {
            String::new()
        };
        let line = format!("{rows}{mib:.1} MiB, {:.1} MiB/s, {secs:.1}s", mib / secs);
        let mut err = std::io::stderr().lock();
        if self.tty {
            let _ = write!(err, "\r\x1b[2K{line}{}", if done { "\n" } else { "" });
        } else {
            let _ = writeln!(err, "{line}");
        }
    }
}
