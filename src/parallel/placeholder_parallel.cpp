// placeholder until the parallel layer lands
