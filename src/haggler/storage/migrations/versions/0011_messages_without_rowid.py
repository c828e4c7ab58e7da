"""SQLite: messages become a WITHOUT ROWID table, kept in (chat_id, seq) order, so a turn writes
one B-tree instead of a table and its primary key's index (storage/schema.py). The table is
copied once; nothing changes on PostgreSQL, whose tables have no rowid.

Revision ID: 0011
Revises: 0010
"""

from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def _rebuild(with_rowid: bool) -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    with op.batch_alter_table("messages", recreate="always", table_kwargs={"sqlite_with_rowid": with_rowid}):
        pass


def upgrade() -> None:
    _rebuild(with_rowid=False)


def downgrade() -> None:
    _rebuild(with_rowid=True)
