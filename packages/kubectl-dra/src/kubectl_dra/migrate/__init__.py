"""``kubectl dra migrate``: classic DRA and device-plugin manifests to ``resource.k8s.io/v1``.

Pure conversions: :func:`migrate_documents` takes the documents and returns the objects,
the notes (one per decision) and the errors; reading files and printing is the CLI's job.
"""

from .errors import MigrationError, Note
from .run import Migration, migrate_documents

__all__ = ["Migration", "MigrationError", "Note", "migrate_documents"]
