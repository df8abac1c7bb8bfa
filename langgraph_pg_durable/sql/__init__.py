"""Statement text by family (writes, reads, deletes), the schema and its migrations.

The families are pure text builders; only `schema.py` (which quotes the schema name with
psycopg.sql) and `statements.py` (which renders every statement once per schema) import
psycopg, so the sans-I/O core can import the result formats declared beside the reads.
"""
