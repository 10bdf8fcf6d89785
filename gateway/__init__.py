"""The platform side of Hygieia: adapters, sessions, hygiene, delivery, storage, admin."""
