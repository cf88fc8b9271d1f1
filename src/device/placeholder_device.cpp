// placeholder until the device layer lands
