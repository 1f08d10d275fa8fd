//! Room reservations made by `POST /realtime/session/prepare-room`.
//!
//! A reservation names a room ahead of a start; the next start by the same credential consumes
//! the oldest open reservation (first in, first out), so SDKs that call prepare-room and then
//! start need not carry anything between the two calls.

use sqlx::Row;
use uuid::Uuid;

use crate::{Store, StoreResult};

/// An open room reservation.
#[derive(Debug, Clone, PartialEq)]
pub struct RoomReservation {
    /// Reservation id.
    pub id: String,
    /// Reserved room name.
    pub room_name: String,
    /// Lapse time.
    pub expires_us: i64,
}

impl Store {
    /// Reserves `room_name` for the credential until `expires_us`.
    pub async fn reserve_room(
        &self,
        workspace_id: &str,
        project_id: &str,
        credential_id: &str,
        room_name: &str,
        now_us: i64,
        expires_us: i64,
    ) -> StoreResult<RoomReservation> {
        let id = Uuid::new_v4().to_string();
        sqlx::query(
            "INSERT INTO room_reservations (id, workspace_id, project_id, credential_id, room_name, created_us, expires_us) \
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(&id)
        .bind(workspace_id)
        .bind(project_id)
        .bind(credential_id)
        .bind(room_name)
        .bind(now_us)
        .bind(expires_us)
        .execute(&self.writer)
        .await?;
        Ok(RoomReservation { id, room_name: room_name.to_owned(), expires_us })
    }

    /// Consumes the credential's oldest open, unexpired reservation, if any. Safe under
    /// concurrency: the conditional update lets exactly one caller win each reservation.
    pub async fn consume_room_reservation(
        &self,
        credential_id: &str,
        now_us: i64,
    ) -> StoreResult<Option<RoomReservation>> {
        loop {
            let Some(row) = sqlx::query(
                "SELECT id, room_name, expires_us FROM room_reservations \
                 WHERE credential_id = $1 AND consumed_us IS NULL AND expires_us > $2 ORDER BY created_us, id LIMIT 1",
            )
            .bind(credential_id)
            .bind(now_us)
            .fetch_optional(&self.pool)
            .await?
            else {
                return Ok(None);
            };
            let reservation = RoomReservation {
                id: row.try_get("id")?,
                room_name: row.try_get("room_name")?,
                expires_us: row.try_get("expires_us")?,
            };
            let won =
                sqlx::query("UPDATE room_reservations SET consumed_us = $1 WHERE id = $2 AND consumed_us IS NULL")
                    .bind(now_us)
                    .bind(&reservation.id)
                    .execute(&self.writer)
                    .await?;
            if won.rows_affected() == 1 {
                return Ok(Some(reservation));
            }
        }
    }

    /// Number of open, unexpired reservations of a credential (bounds prepare-room).
    pub async fn count_open_reservations(&self, credential_id: &str, now_us: i64) -> StoreResult<i64> {
        Ok(sqlx::query_scalar(
            "SELECT COUNT(*) FROM room_reservations WHERE credential_id = $1 AND consumed_us IS NULL AND expires_us > $2",
        )
        .bind(credential_id)
        .bind(now_us)
        .fetch_one(&self.pool)
        .await?)
    }
}

/// A fresh reservation-free room name (`svc-<uuid>`).
pub fn new_room_name() -> String {
    format!("svc-{}", Uuid::new_v4().simple())
}
