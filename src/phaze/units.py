"""Binary size units, defined once for every stage (names say GiB where 2^30 is meant; see DESIGN.md)."""

KiB = 2**10
MiB = 2**20
GiB = 2**30
