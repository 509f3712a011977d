"""The configuration (SPEC section 2): its models (`models.py`), what is wrong with one (`problems.py`), finding,
reading and merging its files (`finding.py`), watching them (`watching.py`), the config in force (`source.py`), and
the pieces its files are written in (`durations.py`, `jsonc.py`).

A config that fails validation raises `ConfigError` naming the file and the offending field; the daemon keeps the
previous config in force when a reload fails.
"""
