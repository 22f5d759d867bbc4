-- `moat pins approve NAME` finds a pin by the name clients see.
CREATE INDEX tool_pins_by_exposed_name ON tool_pins (exposed_name);
