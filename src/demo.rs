//! `serve --demo`: seeds (idempotently) a demo team with an owner, events enabled, a canvas
//! with table elements, a data key and an events token; writes them to `<data-dir>/demo.json`
//! and prints ready-to-paste curl commands.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::accounts::password;
use crate::accounts::workspace::share_url;
use crate::catalog::{Catalog, CatalogError, NewElement, Role, SecretKind};

/// The contents of `demo.json` (SPEC §5), plus the element on the sample event's table.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DemoInfo {
    /// Base URL of the table download interface.
    pub base_url: String,
    /// Base URL of the event ingestion interface.
    pub events_url: String,
    /// `x-api-key` value.
    pub data_api_key: String,
    /// `X-Auth-Token` value.
    pub events_token: String,
    /// Demo team.
    pub team_id: String,
    /// Demo canvas.
    pub canvas_id: String,
    /// Table element on `tracks`.
    pub element_id: String,
    /// Share URL of that element.
    pub share_url: String,
    /// Table element on `purchased_an_item`, where the README's sample event lands.
    pub event_element_id: String,
    /// The settings page's sign-in form.
    #[serde(default)]
    pub login_url: String,
    /// The demo owner's sign-in email.
    #[serde(default)]
    pub owner_email: String,
    /// The demo owner's password (kept across restarts while it still works).
    #[serde(default)]
    pub owner_password: String,
}

const TEAM: &str = "demo";
const OWNER: &str = "demo-owner";
const OWNER_EMAIL: &str = "demo-owner@example.com";
const CANVAS: &str = "Demo canvas";

/// Seeds the demo and writes `demo.json`; reuses secrets from an earlier `demo.json` while
/// they are still valid.
pub fn seed(
    catalog: &Catalog,
    data_dir: &Path,
    base_url: &str,
    app_url: &str,
) -> Result<DemoInfo, CatalogError> {
    let team = match catalog.find_team(TEAM) {
        Ok(t) => t,
        Err(CatalogError::NotFound(_)) => catalog.find_team(&catalog.create_team(TEAM)?)?,
        Err(e) => return Err(e),
    };
    let previous: Option<DemoInfo> = std::fs::read(data_dir.join("demo.json"))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok());
    let owner_password = seed_owner(catalog, &team.id, previous.as_ref())?;
    catalog.set_events_enabled(&team.id, true)?;
    let canvas_id = match catalog.find_canvas_by_name(&team.id, CANVAS)? {
        Some(id) => id,
        None => catalog.create_canvas(&team.id, CANVAS)?,
    };
    let element = |table: &str, name: &str| -> Result<String, CatalogError> {
        match catalog.find_element(&canvas_id, table)? {
            Some(id) => Ok(id),
            None => catalog.create_element(&NewElement {
                canvas: canvas_id.clone(),
                table: table.into(),
                name: Some(name.into()),
                ..Default::default()
            }),
        }
    };
    let element_id = element("tracks", "All events")?;
    let event_element_id = element("purchased_an_item", "Purchases")?;
    let reuse = |kind: SecretKind, old: Option<&String>| -> Result<Option<String>, CatalogError> {
        match old {
            Some(s) if catalog.secret_is_live(kind, s)? => Ok(Some(s.clone())),
            _ => Ok(None),
        }
    };
    let data_api_key = match reuse(
        SecretKind::DataKey,
        previous.as_ref().map(|p| &p.data_api_key),
    )? {
        Some(k) => k,
        None => {
            catalog
                .create_secret(SecretKind::DataKey, &team.id, OWNER)?
                .1
        }
    };
    let events_token = match reuse(
        SecretKind::EventsToken,
        previous.as_ref().map(|p| &p.events_token),
    )? {
        Some(t) => t,
        None => {
            catalog
                .create_secret(SecretKind::EventsToken, &team.id, OWNER)?
                .1
        }
    };
    let info = DemoInfo {
        base_url: base_url.into(),
        events_url: base_url.into(),
        data_api_key,
        events_token,
        team_id: team.id,
        share_url: share_url(app_url, &canvas_id, &element_id),
        canvas_id,
        element_id,
        event_element_id,
        login_url: format!("{}/login", base_url.trim_end_matches('/')),
        owner_email: OWNER_EMAIL.into(),
        owner_password,
    };
    let json = serde_json::to_vec_pretty(&info).expect("serialisable");
    crate::files::write_private(&data_dir.join("demo.json"), &json)?;
    Ok(info)
}

/// Makes sure the demo team has its owner with an email and a password; returns the password
/// (the previous run's while it still matches, else a new random one).
fn seed_owner(
    catalog: &Catalog,
    team_id: &str,
    previous: Option<&DemoInfo>,
) -> Result<String, CatalogError> {
    let user = match catalog.user_for_sign_in(OWNER_EMAIL)? {
        Some((u, _)) => u,
        None => match catalog
            .list_members(team_id)?
            .into_iter()
            .find(|u| u.name == OWNER && u.email.is_none())
        {
            // A demo seeded before accounts existed.
            Some(u) => catalog.set_user_email(&u.id, OWNER_EMAIL)?,
            None => catalog.create_user(team_id, Some(OWNER_EMAIL), OWNER, Role::Owner)?,
        },
    };
    let stored = catalog.password_hash(&user.id)?;
    if let Some(old) = previous.map(|p| p.owner_password.as_str())
        && !old.is_empty()
        && password::verify(old, stored.as_deref())
    {
        return Ok(old.to_string());
    }
    let fresh = crate::catalog::secrets::new_id("demo");
    catalog.set_password_hash(&user.id, &password::hash(&fresh))?;
    Ok(fresh)
}

/// The curl commands printed at start-up.
pub fn instructions(info: &DemoInfo, data_dir: &Path) -> String {
    format!(
        r#"
stowage demo is ready (details in {demo}).

Send an event:
  curl -sS -X POST {events}/v1/event \
    -H 'X-Auth-Token: {token}' -H 'Content-Type: application/json' \
    -d '{{"version":1,"type":"event","event":"Purchased an Item","properties":{{"revenue":"39.95","shippingMethod":"Premium"}},"timestamp":"2012-12-02T00:30:08.276Z"}}'

Or a batch, as Segment SDKs send it (point an SDK's host at {events} with this token as its
write key):
  curl -sS -X POST {events}/v1/batch -u '{token}:' -H 'Content-Type: application/json' \
    -d '{{"batch":[{{"type":"identify","userId":"u1","traits":{{"plan":"pro"}}}},{{"type":"track","userId":"u1","event":"Purchased an Item","properties":{{"revenue":39.95}}}}]}}'

Download the purchases table (events are flushed every flush.interval, 10s by default):
  curl -sS -X POST {base}/data/table \
    -H 'x-api-key: {key}' -H 'Content-Type: application/json' \
    -d '{{"canvasId":"{canvas}","elementId":"{event_element}"}}'

Download every event (the tracks table):
  curl -sS -X POST {base}/api/data/table \
    -H 'x-api-key: {key}' -H 'Content-Type: application/json' \
    -d '{{"canvasId":"{canvas}","elementId":"{element}"}}'

Share URL of the tracks element: {share}

Sign in to the settings page (keys, tokens, members, canvases) at {login}
  email:    {email}
  password: {password}
"#,
        login = info.login_url,
        email = info.owner_email,
        password = info.owner_password,
        demo = data_dir.join("demo.json").display(),
        events = info.events_url,
        base = info.base_url,
        token = info.events_token,
        key = info.data_api_key,
        canvas = info.canvas_id,
        element = info.element_id,
        event_element = info.event_element_id,
        share = info.share_url,
    )
}
