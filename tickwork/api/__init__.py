"""The ScheduledJob API: pydantic models of spec and status, and the CRD built from them."""
