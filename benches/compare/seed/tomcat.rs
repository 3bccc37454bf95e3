//! Tomcat 10 from Debian's `tomcat10`, started by the harness with its own
//! CATALINA_BASE in the run's scratch directory: Debian's default conf
//! files copied from /etc/tomcat10 (web.xml declares the default servlet,
//! which serves static files), a server.xml written here with one HTTP/1.1
//! (NIO) connector on 127.0.0.1 and the docroot as the ROOT context's
//! docBase, logs into the base's logs/. Run in the foreground by Debian's
//! catalina.sh (`run`), with the default JRE.

use std::fs;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use super::process::{self, Proc};

pub const HOME: &str = "/usr/share/tomcat10";
const DEFAULT_CONF: &str = "/etc/tomcat10";

/// Why Tomcat cannot run here, if it cannot.
pub fn missing() -> Option<String> {
    let catalina = Path::new(HOME).join("bin/catalina.sh");
    if !catalina.is_file() || !Path::new(DEFAULT_CONF).join("web.xml").is_file() {
        return Some("tomcat10 is not installed (apt-get install tomcat10)".into());
    }
    if crate::programs::which("java").is_none() {
        return Some("tomcat10: no java on PATH (apt-get install default-jre-headless)".into());
    }
    None
}

/// "Apache Tomcat 10.1.x (Debian 10.1.x-1); OpenJDK 17.0.x".
pub fn version() -> String {
    let out = Command::new("dpkg-query")
        .args(["-W", "-f", "${Version}", "tomcat10"])
        .output();
    let deb = out
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "unknown version".into());
    let java = crate::programs::which("java")
        .map(|j| crate::servers::version_of(&j, "-version"))
        .unwrap_or_default();
    format!("Tomcat (Debian tomcat10 {deb}), default servlet; {java}")
}

/// JAVA_HOME of the default JRE: the directory above the `java` on PATH,
/// its symlinks (Debian's alternatives) resolved.
fn java_home() -> Option<PathBuf> {
    let java = fs::canonicalize(crate::programs::which("java")?).ok()?;
    Some(java.parent()?.parent()?.to_path_buf())
}

fn server_xml(port: u16, docroot: &Path) -> String {
    format!(
        r#"<?xml version="1.0" encoding="UTF-8"?>
<!-- Written by staticd's comparison harness (seed tables). -->
<Server port="-1" shutdown="SHUTDOWN">
  <Listener className="org.apache.catalina.startup.VersionLoggerListener" />
  <Listener className="org.apache.catalina.core.JreMemoryLeakPreventionListener" />
  <Listener className="org.apache.catalina.core.ThreadLocalLeakPreventionListener" />
  <Service name="Catalina">
    <!-- Debian's connector (NIO, 200 threads by default), on loopback,
         with a listen queue as long as the other servers' (4096): 500 ab
         clients connecting at once must not be dropped by the kernel. -->
    <Connector address="127.0.0.1" port="{port}" protocol="HTTP/1.1"
               connectionTimeout="20000" acceptCount="4096"
               maxParameterCount="1000" />
    <Engine name="Catalina" defaultHost="localhost">
      <Host name="localhost" appBase="webapps" unpackWARs="false"
            autoDeploy="false" deployOnStartup="false">
        <Context path="" docBase="{}" reloadable="false" />
      </Host>
    </Engine>
  </Service>
</Server>
"#,
        docroot.display()
    )
}

/// Writes the base, starts Tomcat and waits (up to two minutes: a JVM on
/// a busy machine has been seen to take 25 s) until it serves `probe` (a
/// file of `size` bytes) whole.
pub fn start(
    dir: &Path,
    docroot: &Path,
    port: u16,
    probe: &str,
    size: u64,
) -> Result<Proc, String> {
    let io = |p: &Path, e: std::io::Error| format!("{}: {e}", p.display());
    for sub in ["conf", "logs", "temp", "work", "webapps"] {
        let d = dir.join(sub);
        fs::create_dir_all(&d).map_err(|e| io(&d, e))?;
    }
    let conf = dir.join("conf");
    for entry in fs::read_dir(DEFAULT_CONF).map_err(|e| io(Path::new(DEFAULT_CONF), e))? {
        let entry = entry.map_err(|e| e.to_string())?;
        let path = entry.path();
        if path.is_file() && entry.file_name() != "server.xml" {
            let to = conf.join(entry.file_name());
            fs::copy(&path, &to).map_err(|e| io(&to, e))?;
        }
    }
    let xml = conf.join("server.xml");
    fs::write(&xml, server_xml(port, docroot)).map_err(|e| io(&xml, e))?;
    let mut cmd = Command::new(Path::new(HOME).join("bin/catalina.sh"));
    cmd.arg("run")
        .env("CATALINA_HOME", HOME)
        .env("CATALINA_BASE", dir)
        .env("CATALINA_TMPDIR", dir.join("temp"))
        .env_remove("CATALINA_OPTS")
        .env_remove("JAVA_OPTS");
    if let Some(home) = java_home() {
        cmd.env("JAVA_HOME", home);
    }
    // A JVM shuts down on SIGTERM; give it a few seconds before the kill.
    let mut proc = Proc::spawn(cmd, dir, Duration::from_secs(5))?;
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    proc.wait_until(Duration::from_secs(120), || {
        process::get_ok(addr, probe, size, None).map(|_| ())
    })?;
    Ok(proc)
}
