// placeholder until the graph layer lands
