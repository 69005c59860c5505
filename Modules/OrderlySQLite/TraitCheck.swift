#if !SQLite
#error(
  "OrderlySQLite needs Orderly's SQLite trait, which a .package line with traits: [] turns off. Add \"SQLite\" to that line's traits, or leave traits: out for the default."
)
#endif
