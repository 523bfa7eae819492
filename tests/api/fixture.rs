//! Two teams on one in-process server: team A (the harness's seeded team, events enabled, with a
//! canvas) with an owner, a member and the owner's personal access token; team B with its own
//! owner. Helpers make fresh things of team A for a request to act on.

use stowage::catalog::{Catalog, LinkKind, NewElement, Role, SecretKind};
use stowage::config::Config;

use super::client::{Api, Who, fresh_email, user};
use super::common::TestServer;

pub struct Fx {
    pub ts: TestServer,
    pub api: Api,
    /// Team A.
    pub team: String,
    /// Team B.
    pub other_team: String,
    /// Team A's owner, signed in with a cookie.
    pub owner: Who,
    /// Team A's owner's personal access token.
    pub owner_pat: Who,
    /// A member of team A.
    pub member: Who,
    /// Team B's owner.
    pub other: Who,
}

impl Fx {
    pub async fn start() -> Fx {
        Self::start_with(|_| {}).await
    }

    pub async fn start_with(tweak: impl FnOnce(&mut Config)) -> Fx {
        let ts = TestServer::start(tweak).await;
        let c = ts.catalog();
        let team = ts.seeded.team.clone();
        let other_team = c.create_team("team-b").unwrap();
        c.set_events_enabled(&other_team, true).unwrap();
        let (owner_email, member_email, other_email) = (
            fresh_email("a.example"),
            fresh_email("a.example"),
            fresh_email("b.example"),
        );
        user(c, &team, &owner_email, Role::Owner);
        user(c, &team, &member_email, Role::Member);
        user(c, &other_team, &other_email, Role::Owner);
        let api = Api::new(&ts.url(""));
        let owner = api.sign_in(&owner_email).await;
        let member = api.sign_in(&member_email).await;
        let other = api.sign_in(&other_email).await;
        let (_, pat) = c.create_pat(&owner.user_id, None).unwrap();
        Fx {
            owner_pat: Who {
                user_id: owner.user_id.clone(),
                ..Who::pat(&pat)
            },
            ts,
            api,
            team,
            other_team,
            owner,
            member,
            other,
        }
    }

    pub fn catalog(&self) -> &Catalog {
        self.ts.catalog()
    }

    /// A new member of team A; its id.
    pub fn new_member(&self) -> String {
        user(
            self.catalog(),
            &self.team,
            &fresh_email("a.example"),
            Role::Member,
        )
    }

    /// A new data key or events token of team A: (id, secret).
    pub fn new_secret(&self, kind: SecretKind) -> (String, String) {
        self.catalog()
            .create_secret(kind, &self.team, &self.owner.user_id)
            .unwrap()
    }

    /// A new canvas of team A.
    pub fn new_canvas(&self) -> String {
        self.catalog().create_canvas(&self.team, "fresh").unwrap()
    }

    /// A new element on team A's canvas.
    pub fn new_element(&self) -> String {
        self.catalog()
            .create_element(&NewElement {
                canvas: self.ts.seeded.canvas.clone(),
                table: "tracks".into(),
                ..Default::default()
            })
            .unwrap()
    }

    /// A new personal access token of team A's owner: (id, secret).
    pub fn new_pat(&self) -> (String, String) {
        let (info, secret) = self
            .catalog()
            .create_pat(&self.owner.user_id, None)
            .unwrap();
        (info.id, secret)
    }

    /// A new pending invite of team A, sent by its owner.
    pub fn new_invite(&self) -> String {
        let kind = LinkKind::Invite {
            email: fresh_email("invited.example"),
            role: Role::Member,
        };
        let (id, _) = self
            .catalog()
            .create_link(&self.team, &kind, Some(&self.owner.user_id), 60_000)
            .unwrap();
        id
    }

    /// Turns events on or off for both teams.
    pub fn events(&self, on: bool) {
        for t in [&self.team, &self.other_team] {
            self.catalog().set_events_enabled(t, on).unwrap();
        }
    }
}
